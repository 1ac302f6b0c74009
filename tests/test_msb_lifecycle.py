"""Lifecycle semantics of the driver on a real, existing (stopped) sandbox.

The sandbox is made exactly as the driver makes it (its own spec and `msb run` argv) with MSB_LIBKRUNFW_PATH pointing
at a file that is not the library: msb records the sandbox, then cannot build the VM, so it stays Stopped. That is
a real workspace whose VM is down, on any host, without a VM ever running.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from devsy.driver.base import ExecRequest, Mount, MountType, RunOptions
from devsy.driver.microsandbox.driver import MicrosandboxDriver
from devsy.driver.microsandbox.errors import BootFailed, MsbCommandError
from devsy.driver.microsandbox.msb import MsbClient
from devsy.driver.microsandbox.options import MicrosandboxOptions
from devsy.driver.microsandbox.spec import build_spec
from devsy.driver.microsandbox.volumes import ensure_volumes
from devsy.driver.reuse import MountPolicy
from devsy.errors import AlreadyExists, ConfigError, DriverError, NotFound, RecreateRequired
from devsy.runtime.wire.errors import PreconditionFailed
from helpers.msb import msb_json, sandboxes, volumes

WS = "life-ws"
POLICY = "v1;target=/workspaces/p;mode=rw;owner=dev"
REQUESTED = MountPolicy.from_label(POLICY)


def _options(rootfs: Path, folder: Path, **extra) -> RunOptions:
    return RunOptions(image=str(rootfs), remote_user="dev", workspace_mount=Mount(MountType.BIND, "/workspaces/p",
                                                                                  str(folder)),
                      mounts=[Mount(MountType.VOLUME, "/data", "life-data"), Mount(MountType.VOLUME, "/keep",
                                                                                   "life-preexisting")],
                      labels={"dev.devsy.remote-user": "dev", "dev.devsy.mount-policy": POLICY}, **extra)


@pytest.fixture
def stopped(msb_home: Path, msb: MsbClient, no_boot: Path, busybox_rootfs: Path, tmp_path: Path) -> RunOptions:
    """A devsy-made sandbox for WS that exists and is stopped; `life-preexisting` existed before devsy ran."""
    folder = tmp_path / "p"
    folder.mkdir()
    options = _options(busybox_rootfs, folder)
    ensure_volumes(msb, ["life-preexisting"], [])
    spec = build_spec(WS, options, MicrosandboxOptions(), rootfs_dir=True).with_image(str(busybox_rootfs),
                                                                                       pull="never")
    created: list[str] = []
    ensure_volumes(msb, spec.mounts.named_volumes, created)
    assert created == ["life-data"]
    result = msb.run(spec.with_created_volumes(created).argv(), action="creating", timeout=120, check=False)
    assert result.returncode != 0 and "libkrunfw" in result.stderr
    return options


def _updated_at(home: Path) -> str:
    return msb_json(home, "inspect", f"devsy-{WS}")["updated_at"]


def test_find_reports_a_stopped_sandbox_with_labels_and_mounts(stopped: RunOptions, tmp_path: Path) -> None:
    found = MicrosandboxDriver().find(WS)
    assert found is not None and not found.running and found.id == f"devsy-{WS}@{found.created_at}"
    assert found.labels["dev.devsy.remote-user"] == "dev" and found.labels["dev.devsy.workspace"] == WS
    assert found.labels["dev.devsy.mount-policy"] == f"{POLICY};stat-virt=strict;host-perms=private"
    by_target = {m.destination: m for m in found.mounts}
    assert (by_target["/workspaces/p"].type, by_target["/workspaces/p"].source) == ("bind", str(tmp_path / "p"))
    assert (by_target["/data"].type, by_target["/data"].source) == ("volume", "life-data")


def test_reuse_preflight_is_read_only_and_refuses_changed_owner_or_policy(stopped: RunOptions, msb_home: Path
                                                                          ) -> None:
    before = _updated_at(msb_home)
    MicrosandboxDriver().reuse_preflight(WS, "dev", REQUESTED)
    with pytest.raises(RecreateRequired, match="remote user 'dev' -> 'alt'") as user:
        MicrosandboxDriver().reuse_preflight(WS, "alt", REQUESTED)
    assert "--recreate" in user.value.hint
    mirror = MicrosandboxDriver(MicrosandboxOptions(host_permissions="mirror"))
    with pytest.raises(RecreateRequired, match="host-perms=mirror"):
        mirror.reuse_preflight(WS, "dev", REQUESTED)
    assert _updated_at(msb_home) == before and sandboxes(msb_home) == [f"devsy-{WS}"]


def test_stop_on_stopped_succeeds_and_exec_never_boots_it(stopped: RunOptions, msb_home: Path) -> None:
    driver = MicrosandboxDriver()
    driver.stop(WS)
    driver.stop(WS)
    with pytest.raises(PreconditionFailed, match="is not running") as caught:  # FAILED_PRECONDITION on the wire
        driver.exec(WS, ExecRequest(argv=["true"], stdout=io.BytesIO(), stderr=io.BytesIO()))
    assert f"devsy start {WS}" in caught.value.hint
    assert msb_json(msb_home, "inspect", f"devsy-{WS}")["status"] == "Stopped"


def test_start_that_cannot_boot_explains_and_keeps_the_workspace(stopped: RunOptions, msb_home: Path,
                                                                 no_boot: Path) -> None:
    with pytest.raises(BootFailed) as caught:
        MicrosandboxDriver().start(WS)
    assert "libkrunfw" in caught.value.message and str(no_boot) in caught.value.hint
    assert sandboxes(msb_home) == [f"devsy-{WS}"]
    assert sorted(volumes(msb_home)) == ["life-data", "life-preexisting"]


def test_run_on_existing_refuses_and_invalid_replacement_changes_nothing(stopped: RunOptions, msb_home: Path,
                                                                         tmp_path: Path) -> None:
    before = _updated_at(msb_home)
    with pytest.raises(AlreadyExists, match="--recreate"):
        MicrosandboxDriver().run(WS, stopped)
    broken = RunOptions(**{**stopped.__dict__, "allow_recreate": True,
                           "mounts": [Mount(MountType.BIND, "/x", str(tmp_path / "missing"))]})
    with pytest.raises(ConfigError):
        MicrosandboxDriver().run(WS, broken)
    assert _updated_at(msb_home) == before and sorted(volumes(msb_home)) == ["life-data", "life-preexisting"]


def test_logs_of_a_stopped_workspace_and_delete_semantics(stopped: RunOptions, msb_home: Path, tmp_path: Path
                                                          ) -> None:
    driver = MicrosandboxDriver()
    out = tmp_path / "logs"
    with out.open("wb") as stream:
        driver.logs(WS, stream)  # nothing ran, so nothing was captured; reading it is no error
    driver.delete(WS)
    assert sandboxes(msb_home) == [] and volumes(msb_home) == ["life-preexisting"]
    driver.delete(WS)
    assert driver.find(WS) is None
    with pytest.raises(NotFound):
        driver.start(WS)
    with pytest.raises(NotFound):
        driver.logs(WS, out.open("wb"))


def test_a_sandbox_devsy_did_not_make_is_left_alone(msb_home: Path, msb: MsbClient, no_boot: Path,
                                                    busybox_rootfs: Path) -> None:
    msb.run(["create", "--name", f"devsy-{WS}", str(busybox_rootfs)], action="creating", timeout=60, check=False)
    with pytest.raises(DriverError, match="did not create"):
        MicrosandboxDriver().delete(WS)
    assert sandboxes(msb_home) == [f"devsy-{WS}"]


def test_run_that_msb_refuses_removes_the_volumes_it_created(msb_home: Path, no_boot: Path, busybox_rootfs: Path,
                                                             tmp_path: Path) -> None:
    # Two mounts on one guest path: devsy passes it on, msb refuses it before creating a sandbox.
    folder = tmp_path / "p"
    folder.mkdir()
    options = RunOptions(image=str(busybox_rootfs), env={"TOKEN": "tok-never-shown"},
                         workspace_mount=Mount(MountType.BIND, "/workspaces/p", str(folder)),
                         mounts=[Mount(MountType.VOLUME, "/data", "refused-data"), Mount(MountType.TMPFS, "/data")])
    with pytest.raises(MsbCommandError, match="multiple volumes cannot mount the same guest path") as caught:
        MicrosandboxDriver().run(WS, options)
    assert not isinstance(caught.value, BootFailed)
    shown = str(caught.value) + caught.value.stderr_tail
    assert "TOKEN=***" in shown and "tok-never-shown" not in shown and str(folder) not in shown
    assert "refused-data" not in shown
    assert sandboxes(msb_home) == [] and volumes(msb_home) == []
