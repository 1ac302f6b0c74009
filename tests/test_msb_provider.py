"""devsy-provider-microsandbox (the built-in MicroSandbox driver behind Runtime Protocol v1) against the real msb.

No VM is needed: conformance runs what it can and reports the cases that need a booted VM with the provider's
evidence; the reuse and ON_RUN permission rules are checked on a real devsy-made sandbox that exists but is stopped
(made with MSB_LIBKRUNFW_PATH at a file that is not the library, as in test_msb_lifecycle.py); and a first
`devsy up --provider external-microsandbox` whose VM cannot boot must leave nothing behind, like the built-in driver.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers.projects import make_project
from devsy.driver.base import Mount, MountType, RunOptions
from devsy.driver.external.driver import ExternalDriver
from devsy.driver.external.providers import provider_command
from devsy.driver.microsandbox.msb import MsbClient
from devsy.driver.microsandbox.options import MicrosandboxOptions
from devsy.driver.microsandbox.spec import build_spec
from devsy.driver.reuse import MountPolicy
from devsy.errors import AlreadyExists, RecreateRequired
from devsy.providers.microsandbox import LABEL_MOUNT_PRESENTATION, split_policy
from devsy.runtime.wire.errors import InvalidArgument, ProviderExited
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.plugin_client import PluginClient
from devsy.runtime.host.testing import BIN_DIR, running
from helpers.msb import images, msb_json, run_msb, sandboxes, volumes

WS = "prov-ws"
POLICY = "v1;target=/workspaces/p;mode=rw;owner=dev"
SECRET = "env-5ecret-never-shown"
CONFORMANCE_TIMEOUT_S = 900
# Cases that need nothing but the provider and msb: they must pass on any host.
NO_VM_CASES = ("info", "discovery", "validation/invalid-requests", "validation/absent-workspace")


def _command(**options: str):
    return provider_command("external-microsandbox", options)


@pytest.fixture
def stopped(msb_home: Path, msb: MsbClient, no_boot: Path, busybox_rootfs: Path, tmp_path: Path) -> RunOptions:
    """A sandbox for WS made exactly as the driver makes it, which exists and is stopped (it never booted)."""
    folder = tmp_path / "p"
    folder.mkdir()
    options = RunOptions(image=str(busybox_rootfs), remote_user="dev",
                         workspace_mount=Mount(MountType.BIND, "/workspaces/p", str(folder)),
                         labels={"dev.devsy.remote-user": "dev", "dev.devsy.mount-policy": POLICY})
    spec = build_spec(WS, options, MicrosandboxOptions(), rootfs_dir=True).with_image(str(busybox_rootfs),
                                                                                       pull="never")
    result = msb.run(spec.argv(), action="creating", timeout=120, check=False)
    assert result.returncode != 0 and "libkrunfw" in result.stderr
    return options


def _created_at(home: Path) -> str:
    return msb_json(home, "inspect", f"devsy-{WS}")["created_at"]


def test_find_reports_the_host_policy_and_reuse_preflight_checks_the_msb_part(stopped: RunOptions,
                                                                             msb_home: Path) -> None:
    with running(_command()) as provider:
        found = provider.client.find(WS)
        assert found is not None and not found.running
        assert found.labels["dev.devsy.mount-policy"] == POLICY  # what the host compares with its own policy
        assert found.labels[LABEL_MOUNT_PRESENTATION] == "stat-virt=strict;host-perms=private"
        provider.client.reuse_preflight(WS, "dev")
        with pytest.raises(RecreateRequired, match="--recreate"):
            provider.client.reuse_preflight(WS, "alt")
    # The host's whole check (provider ReusePreflight + its own comparison) accepts the unchanged workspace.
    host = ExternalDriver("external-microsandbox", _command())
    try:
        host.reuse_preflight(WS, "dev", MountPolicy.from_label(POLICY))
        with pytest.raises(RecreateRequired, match="workspace mount policy"):
            host.reuse_preflight(WS, "dev", MountPolicy.from_label(POLICY.replace("mode=rw", "mode=ro")))
    finally:
        host.close()
    with running(_command(MICROSANDBOX_WORKSPACE_HOST_PERMISSIONS="mirror")) as mirror:
        # A changed presentation option is refused like a changed owner (its value is redacted: options may be
        # secrets, so the message names the key only).
        with pytest.raises(RecreateRequired, match="host-perms=private' -> .*host-perms="):
            mirror.client.reuse_preflight(WS, "dev")
    assert sandboxes(msb_home) == [f"devsy-{WS}"] and msb_json(msb_home, "inspect", f"devsy-{WS}")["status"] == \
        "Stopped", "ReusePreflight changed the sandbox"


def test_run_image_replaces_only_with_permission_and_validates_first(stopped: RunOptions, msb_home: Path) -> None:
    created = _created_at(msb_home)
    with running(_command()) as provider:
        assert provider.client.info(opt_in_on_run=True).recreate_on_run
        assert provider.client.info(opt_in_on_run=False).recreate_mode == "delete"
        with pytest.raises(AlreadyExists):
            provider.client.run_image(WS, stopped)
        invalid = RunOptions(image=stopped.image, remote_user="dev", allow_recreate=True,
                             mounts=[Mount(MountType.TMPFS, "relative/target")])
        with pytest.raises(InvalidArgument, match="absolute path"):
            provider.client.run_image(WS, invalid)
    assert _created_at(msb_home) == created, "a refused RunImage touched the existing sandbox"
    with running(_command()) as fresh:  # state lives in msb, not in the provider process; no permission carried
        assert fresh.client.find(WS) is not None
        with pytest.raises(AlreadyExists):
            fresh.client.run_image(WS, stopped)
        fresh.client.delete(WS)
        assert fresh.client.find(WS) is None
    assert sandboxes(msb_home) == []


def test_an_invalid_option_stops_the_provider_naming_it_without_its_value() -> None:
    # Built without provider_command's host-side validation: the provider itself must refuse, too.
    command = ProviderCommand(binary=str(BIN_DIR / "devsy-provider-microsandbox"),
                              env={"MICROSANDBOX_MEMORY": "4294967296123"})
    with pytest.raises(ProviderExited, match="MICROSANDBOX_MEMORY") as info:
        PluginClient.launch(command)
    assert "4294967296123" not in str(info.value)


def test_split_policy_separates_the_msb_presentation() -> None:
    base, presentation = split_policy(MountPolicy.from_label(f"{POLICY};stat-virt=off;host-perms=private"))
    assert (base.to_label(), presentation) == (POLICY, (("stat-virt", "off"), ("host-perms", "private")))
    assert split_policy(MountPolicy.from_label(POLICY)) == (MountPolicy.from_label(POLICY), ())


@pytest.mark.docker  # the guest image reaches msb from the Docker engine
def test_conformance_reports_the_cases_that_need_a_booted_vm(msb_home: Path, boot_probe) -> None:
    env = {**os.environ, "PATH": f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}", "MSB_HOME": str(msb_home)}
    env.pop("MSB_LIBKRUNFW_PATH", None)
    proc = subprocess.run([str(BIN_DIR / "devsy-conformance"), "devsy-provider-microsandbox", "serve"],
                          capture_output=True, text=True, env=env, timeout=CONFORMANCE_TIMEOUT_S)
    lines = {line.split()[1]: (line.split()[0], line) for line in proc.stdout.splitlines()
             if line.split() and line.split()[0] in ("PASS", "FAIL", "SKIP", "BLOCKED")}
    assert all(lines[name][0] == "PASS" for name in NO_VM_CASES), proc.stdout + proc.stderr
    if boot_probe.ok:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert {status for status, _ in lines.values()} == {"PASS"}
    else:
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert "FAIL" not in {status for status, _ in lines.values()}, proc.stdout
        blocked = [name for name, (status, _) in lines.items() if status == "BLOCKED"]
        assert set(blocked) == set(lines) - set(NO_VM_CASES), proc.stdout
        first = lines[blocked[0]][1]
        assert "needs a booted instance" in first and "did not boot" in first and "msb doctor" in first, first
        assert proc.stdout.rstrip().splitlines()[-1].startswith(f"4 passed, 0 failed, 0 skipped, {len(blocked)} "
                                                                "blocked: need a booted instance")
    assert sandboxes(msb_home) == [] and volumes(msb_home) == [], "conformance left msb objects behind"


# -- a first `devsy up` through the external provider whose VM never boots ----------------------------------------

def _nothing_left(devsy, home: Path, ws_id: str, kept_volumes: list[str]) -> None:
    assert sandboxes(home) == []
    assert volumes(home) == kept_volumes
    assert not (devsy.home / "workspaces" / ws_id).exists()
    assert not devsy.ssh_config.exists() or f"{ws_id}.devsy" not in devsy.ssh_config.read_text()


def _up(devsy, source: Path | str, ws_id: str, home: Path, **env: str):
    return devsy.up(source, "--id", ws_id, "--provider", "external-microsandbox", ok=False, timeout=600,
                    extra_env={"MSB_HOME": str(home), **env})


def test_external_first_up_that_cannot_boot_removes_what_it_created(devsy, ws_id, tmp_path, msb_home, no_boot,
                                                                   guest_image):
    assert run_msb(msb_home, "volume", "create", f"{ws_id}-shared").returncode == 0  # the user's, before devsy ran
    project = make_project(tmp_path / "p", {
        "image": guest_image, "containerEnv": {"TOKEN": SECRET},
        "mounts": [f"type=volume,source={ws_id}-data,target=/data", f"type=volume,source={ws_id}-shared,target=/s"],
    })
    for attempt in (1, 2):  # a retry meets the same clean slate: no AlreadyExists from the first attempt's leftovers
        result = _up(devsy, project, ws_id, msb_home, MSB_LIBKRUNFW_PATH=str(no_boot))
        assert result.returncode == 1, result.text
        error = result.json["error"]
        assert error["type"] == "boot-failed", (attempt, error)  # the built-in driver's type, across the protocol
        assert "did not boot" in error["message"] and "libkrunfw" in error["message"]
        assert "msb doctor" in error["hint"] and f"MSB_LIBKRUNFW_PATH ({no_boot})" in error["hint"]
        assert SECRET not in result.text and str(project) not in error["message"]
        _nothing_left(devsy, msb_home, ws_id, [f"{ws_id}-shared"])
    assert [ref.split(":")[0] for ref in images(msb_home)] == ["devsy-image"]


def test_external_first_up_where_kvm_cannot_boot_guests_leaves_nothing(devsy, ws_id, msb_home, guest_image,
                                                                      boot_probe, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MSB_LIBKRUNFW_PATH", raising=False)
    if boot_probe.ok:
        pytest.skip(f"this host boots microVMs (probe: `{boot_probe.command}` exited 0 in {boot_probe.duration:.1f} "
                    "s), so a natural boot failure cannot happen here; the forced one is covered by the test above")
    result = _up(devsy, guest_image, ws_id, msb_home)  # an image source: devsy manages a content folder for it
    assert result.returncode == 1, result.text
    error = result.json["error"]
    assert error["type"] == "boot-failed" and "did not boot" in error["message"], error
    assert "msb doctor" in error["hint"] and "KVM" in error["hint"]
    _nothing_left(devsy, msb_home, ws_id, [])
    status = devsy.run("status", ws_id, "--json")
    assert json.loads(status.stdout)["error"]["type"] == "workspace-not-found"


def test_host_refuses_an_invalid_option_before_anything_exists(devsy, ws_id, msb_home, guest_image):
    result = devsy.up(guest_image, "--id", ws_id, "--provider", "external-microsandbox", "--provider-option",
                      "MICROSANDBOX_CPUS=999", ok=False, extra_env={"MSB_HOME": str(msb_home)})
    assert result.returncode == 2, result.text
    error = result.json["error"]
    assert error["type"] == "usage" and "MICROSANDBOX_CPUS" in error["message"] and "999" not in error["message"]
    _nothing_left(devsy, msb_home, ws_id, [])
