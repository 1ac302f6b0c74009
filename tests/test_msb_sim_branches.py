"""Every running-state branch of devsy's MicrosandboxDriver, through the msb simulator (fixtures/msb_sim, a stand-in
backed by Docker: it proves devsy's driver logic, never MicroSandbox): find of a running and of a stopped sandbox,
start of a stopped one and of a running one, stop with the forced fallback after the graceful budget, delete of a
running sandbox, replace (allow_recreate), cancellation of an exec (the guest's whole tree ends) and logs of a
running sandbox. What happens in the sandbox is observed from its container (`docker exec ... ps`), not via devsy."""

from __future__ import annotations

import io
import subprocess
import threading
from pathlib import Path

import pytest

from devsy.bounded_wait import poll_until
from devsy.driver.base import CancelToken, ExecRequest, InstanceStatus, Mount, MountType, RunOptions
from devsy.driver.microsandbox import driver as driver_module
from devsy.driver.microsandbox.driver import MicrosandboxDriver
from devsy.driver.microsandbox.exec_stream import CANCELLED_EXIT_CODE
from devsy.driver.microsandbox.naming import LABEL_CREATED_VOLUMES, sandbox_name
from devsy.errors import DevsyError
from fixtures.msb_sim.docker import container_name, container_state
from test_msb_exec_failure import _Watch
from test_msb_sim_driver import KEEP_ALIVE, SIM, WS, sim_home  # noqa: F401 - sim_home is a fixture

pytestmark = pytest.mark.docker
DEADLINE_S = 120.0
DEAF_TO_TERM = ["/bin/sh", "-c", "trap '' TERM; while :; do sleep 1; done"]  # only a KILL ends it


def _up(busybox_rootfs: Path, cmd: list[str] = KEEP_ALIVE, **options) -> MicrosandboxDriver:
    driver = MicrosandboxDriver()
    assert driver.run(WS, RunOptions(image=str(busybox_rootfs), cmd=cmd, **options)).running
    return driver


def _status(driver: MicrosandboxDriver) -> InstanceStatus | None:
    found = driver.find(WS)
    return found.status if found is not None else None


def _guest(*argv: str) -> str:
    """A command in the sandbox's container, run by Docker (an observation independent of devsy and msb)."""
    done = subprocess.run(["docker", "exec", container_name(sandbox_name(WS)), *argv], capture_output=True,
                          text=True, timeout=DEADLINE_S)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _sim(*args: str) -> str:
    return subprocess.run([SIM, *args], capture_output=True, text=True, timeout=DEADLINE_S, check=True).stdout


def test_find_start_and_stop_of_running_and_stopped_sandboxes(sim_home: Path, busybox_rootfs: Path) -> None:
    driver = _up(busybox_rootfs)
    assert _status(driver) is InstanceStatus.RUNNING
    first_boot = _guest("cat", "/proc/1/stat").split()[21]  # the workload's start time
    driver.start(WS)  # already running: success, and the workload is the same process
    assert _status(driver) is InstanceStatus.RUNNING and _guest("cat", "/proc/1/stat").split()[21] == first_boot
    driver.stop(WS)
    assert _status(driver) is InstanceStatus.STOPPED
    driver.stop(WS)  # already stopped: nothing to do
    driver.start(WS)
    assert _status(driver) is InstanceStatus.RUNNING


def test_stop_forces_a_workload_that_ignores_the_graceful_stop(sim_home: Path, busybox_rootfs: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    driver = _up(busybox_rootfs, DEAF_TO_TERM)
    monkeypatch.setattr(driver_module, "STOP_GRACE_S", 1)  # the driver's graceful budget, shortened
    driver.stop(WS)
    assert _status(driver) is InstanceStatus.STOPPED
    state = container_state(sandbox_name(WS))
    assert state is not None and state["ExitCode"] == 137  # KILLed: `msb stop --force` after the graceful one failed


def test_delete_of_a_running_sandbox_removes_it_and_its_volumes(sim_home: Path, busybox_rootfs: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_module, "STOP_GRACE_S", 1)
    driver = _up(busybox_rootfs, DEAF_TO_TERM, mounts=[Mount(MountType.VOLUME, "/data", f"{WS}-data")])
    driver.delete(WS)
    assert driver.find(WS) is None
    assert container_state(sandbox_name(WS)) is None
    assert _sim("volume", "ls", "-q") == ""


def test_replace_validates_before_removing_and_carries_the_volumes(sim_home: Path, busybox_rootfs: Path,
                                                                   tmp_path: Path) -> None:
    volume = Mount(MountType.VOLUME, "/data", f"{WS}-data")
    folder = tmp_path / "project"
    folder.mkdir()
    workspace = Mount(MountType.BIND, "/workspaces/project", str(folder))
    driver = _up(busybox_rootfs, mounts=[volume], workspace_mount=workspace)
    _guest("sh", "-c", "echo kept > /data/file; echo old > /old-vm")
    old = driver.find(WS)
    assert old is not None

    refused = RunOptions(image=str(busybox_rootfs), cmd=KEEP_ALIVE, mounts=[volume], workspace_mount=workspace,
                         remote_user="no-such-user", allow_recreate=True)
    with pytest.raises(DevsyError, match="no-such-user"):
        driver.run(WS, refused)
    assert _guest("cat", "/old-vm") == "old\n"  # validation failed: the old VM runs on, untouched

    replaced = driver.run(WS, RunOptions(image=str(busybox_rootfs), cmd=KEEP_ALIVE, mounts=[volume],
                                         workspace_mount=workspace, allow_recreate=True))
    assert replaced.running and replaced.created_at != old.created_at
    assert _guest("sh", "-c", "cat /data/file; [ ! -e /old-vm ] && echo new-vm") == "kept\nnew-vm\n"
    assert f"{WS}-data" in replaced.labels[LABEL_CREATED_VOLUMES]  # still devsy's: a delete removes it
    driver.delete(WS)
    assert _sim("volume", "ls", "-q") == ""


def _sleepers() -> list[str]:
    return [line for line in _guest("sh", "-c", "ps").splitlines() if line.endswith(("sleep 601", "sleep 602"))]


def test_a_cancelled_exec_ends_the_guest_process_tree(sim_home: Path, busybox_rootfs: Path) -> None:
    driver = _up(busybox_rootfs)
    stdout, cancel = _Watch(b"started\n"), CancelToken()
    script = "sleep 601 & sleep 602 & echo started; wait"
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(driver.exec(WS, ExecRequest(
        argv=["/bin/sh", "-c", script], stdout=stdout, stderr=io.BytesIO(), cancel=cancel)).exit_code))
    worker.start()
    try:
        assert stdout.seen.wait(DEADLINE_S), "the guest never started the command"
        assert len(_sleepers()) == 2, _guest("sh", "-c", "ps")
    finally:
        cancel.cancel()
        worker.join(DEADLINE_S)
    assert result == [CANCELLED_EXIT_CODE]
    poll_until(_sleepers, lambda left: not left, timeout=DEADLINE_S, interval=0.2,
               what="the cancelled command's processes ending in the guest")


def test_logs_of_a_running_sandbox_hold_what_the_workload_printed(sim_home: Path, busybox_rootfs: Path) -> None:
    workload = ["/bin/sh", "-c", "echo out-marker-1; echo err-marker-2 >&2; exec sleep 3600"]
    driver = _up(busybox_rootfs, workload)

    def logs() -> bytes:
        out = io.BytesIO()
        driver.logs(WS, out)
        return out.getvalue()

    poll_until(logs, lambda text: b"out-marker-1\n" in text and b"err-marker-2\n" in text, timeout=DEADLINE_S,
               interval=0.2, what="the workload's markers in `devsy logs`")
    assert _status(driver) is InstanceStatus.RUNNING


def test_exec_in_a_stopped_sandbox_is_refused_and_does_not_boot_it(sim_home: Path, busybox_rootfs: Path) -> None:
    driver = _up(busybox_rootfs)
    driver.stop(WS)
    with pytest.raises(DevsyError, match="is not running"):
        driver.exec(WS, ExecRequest(argv=["true"], stdout=io.BytesIO(), stderr=io.BytesIO()))
    assert _status(driver) is InstanceStatus.STOPPED  # `msb exec` would have booted it


def test_replace_of_a_stopped_sandbox(sim_home: Path, busybox_rootfs: Path) -> None:
    driver = _up(busybox_rootfs)
    old = driver.find(WS)
    driver.stop(WS)
    assert old is not None and _status(driver) is InstanceStatus.STOPPED
    replaced = driver.run(WS, RunOptions(image=str(busybox_rootfs), cmd=KEEP_ALIVE, allow_recreate=True))
    assert replaced.running and replaced.created_at != old.created_at
    assert _sim("ls", "-q").split() == [sandbox_name(WS)]
