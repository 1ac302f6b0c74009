"""A first `devsy up --provider microsandbox` whose microVM never boots, through the real CLI and the real msb.

It must end with a typed error that summarizes msb's diagnostics and says what to check, and leave no sandbox, no
volume it created, no record, no SSH block and no content folder. Forced on any host by pointing
MSB_LIBKRUNFW_PATH at a file that is not the library; and, where this host's KVM cannot boot guests (as on the
machines this project is developed on), as the natural failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.projects import make_project
from helpers.msb import images, run_msb, sandboxes, volumes

SECRET = "env-5ecret-never-shown"


def _nothing_left(devsy, home: Path, ws_id: str, kept_volumes: list[str]) -> None:
    assert sandboxes(home) == []
    assert volumes(home) == kept_volumes
    assert not (devsy.home / "workspaces" / ws_id).exists()
    assert not devsy.ssh_config.exists() or f"{ws_id}.devsy" not in devsy.ssh_config.read_text()


def _up(devsy, source: Path | str, ws_id: str, home: Path, **env: str):
    return devsy.up(source, "--id", ws_id, "--provider", "microsandbox", ok=False, timeout=600,
                    extra_env={"MSB_HOME": str(home), **env})


def test_first_up_that_cannot_boot_removes_what_it_created(devsy, ws_id, tmp_path, msb_home, no_boot, guest_image):
    assert run_msb(msb_home, "volume", "create", f"{ws_id}-shared").returncode == 0  # the user's, before devsy ran
    project = make_project(tmp_path / "p", {
        "image": guest_image, "containerEnv": {"TOKEN": SECRET},
        "mounts": [f"type=volume,source={ws_id}-data,target=/data", f"type=volume,source={ws_id}-shared,target=/s"],
    })
    for attempt in (1, 2):  # a retry meets the same clean slate: no AlreadyExists from the first attempt's leftovers
        result = _up(devsy, project, ws_id, msb_home, MSB_LIBKRUNFW_PATH=str(no_boot))
        assert result.returncode == 1, result.text
        error = result.json["error"]
        assert error["type"] == "boot-failed", (attempt, error)
        assert "did not boot" in error["message"] and "libkrunfw" in error["message"]
        assert "msb doctor" in error["hint"] and f"MSB_LIBKRUNFW_PATH ({no_boot})" in error["hint"]
        assert "KVM" in error["hint"]
        assert SECRET not in result.text and str(project) not in error["message"]
        _nothing_left(devsy, msb_home, ws_id, [f"{ws_id}-shared"])
    # The image stays loaded under its digest (a cache, like Docker's images); the next `up` will not load it again.
    assert [ref.split(":")[0] for ref in images(msb_home)] == ["devsy-image"]


def test_first_up_where_kvm_cannot_boot_guests_leaves_nothing(devsy, ws_id, msb_home, guest_image, boot_probe,
                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MSB_LIBKRUNFW_PATH", raising=False)
    probe = boot_probe
    if probe.ok:
        pytest.skip(f"this host boots microVMs (probe: `{probe.command}` exited 0 in {probe.duration:.1f} s), so a "
                    "natural boot failure cannot happen here; the forced one is covered by the test above")
    assert "did not boot" in probe.output_tail, probe  # the probe failed at the boot itself, not before it
    result = _up(devsy, guest_image, ws_id, msb_home)  # an image source: devsy manages a content folder for it
    assert result.returncode == 1, result.text
    error = result.json["error"]
    assert error["type"] == "boot-failed" and "did not boot" in error["message"], error
    if "before agent relay became available" in probe.output_tail:  # the failure of these machines (kvm-pvm)
        assert "before agent relay became available" in error["message"]
    assert "msb doctor" in error["hint"] and "KVM" in error["hint"]
    _nothing_left(devsy, msb_home, ws_id, [])
    status = devsy.run("status", ws_id, "--json")
    assert json.loads(status.stdout)["error"]["type"] == "workspace-not-found"
