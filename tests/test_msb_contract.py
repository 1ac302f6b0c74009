"""The msb client and driver against the real `msb` (no VM needed): absence, surfaced failures, volumes, typed and
redacted errors, bounded and cancellable commands."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import psutil
import pytest

from devsy.driver.base import CancelToken
from devsy.driver.microsandbox.driver import MicrosandboxDriver
from devsy.driver.microsandbox.errors import MsbCommandError, MsbTimeout
from devsy.driver.microsandbox.locate import MsbBinary, find_msb, locate_msb
from devsy.driver.microsandbox.msb import MsbClient
from devsy.driver.microsandbox.volumes import ensure_volumes, remove_volumes
from devsy.errors import BackendUnavailable, Cancelled, NotFound
from helpers.msb import volumes


def test_bundled_msb_is_found_and_new_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MSB_PATH", raising=False)
    binary = locate_msb()
    assert binary.path.endswith("microsandbox/_bundled/bin/msb") and binary.version >= (0, 7, 11)


def test_msb_path_override_and_version_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MSB_PATH", str(tmp_path / "missing-msb"))
    with pytest.raises(BackendUnavailable, match="MSB_PATH"):
        find_msb()
    old = _script(tmp_path / "old-msb", 'echo "msb 0.6.3"')
    monkeypatch.setenv("MSB_PATH", str(old))
    with pytest.raises(BackendUnavailable) as caught:
        locate_msb()
    assert "0.6.3" in caught.value.message and "0.7.11" in caught.value.message
    assert "pip install microsandbox==0.7.11" in caught.value.hint


def test_inspect_of_missing_sandbox_is_absent(msb_home: Path) -> None:
    driver = MicrosandboxDriver()
    assert driver.find("absent-ws") is None
    driver.delete("absent-ws")  # delete of a missing workspace succeeds
    with pytest.raises(NotFound):
        driver.start("absent-ws")
    with pytest.raises(NotFound):
        driver.reuse_preflight("absent-ws", "dev", None)


def test_inspect_failing_for_another_reason_surfaces(msb_home: Path, msb: MsbClient) -> None:
    assert msb.run(["ls"], action="initialising the state", timeout=30).returncode == 0
    database = msb_home / "db" / "msb.db"
    assert database.is_file()
    for sidecar in database.parent.glob("msb.db-*"):
        sidecar.unlink()
    database.write_bytes(b"this is not an sqlite database" * 64)  # a corrupted msb state, as after a bad disk
    with pytest.raises(MsbCommandError) as caught:
        MicrosandboxDriver().find("some-ws")
    assert "file is not a database" in caught.value.message
    assert caught.value.returncode == 1 and "msb inspect devsy-some-ws" in caught.value.message


def test_state_directory_that_is_a_file_surfaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    not_a_dir = tmp_path / "msb-home-file"
    not_a_dir.write_text("x")
    monkeypatch.setenv("MSB_HOME", str(not_a_dir))
    with pytest.raises(MsbCommandError, match="Not a directory"):
        MicrosandboxDriver().find("some-ws")


def test_volume_create_twice_is_tolerated_and_only_created_ones_are_removed(msb_home: Path, msb: MsbClient) -> None:
    first: list[str] = []
    ensure_volumes(msb, ["devsy-t-data", "devsy-t-cache"], first)
    second: list[str] = []
    ensure_volumes(msb, ["devsy-t-data"], second)
    assert first == ["devsy-t-data", "devsy-t-cache"] and second == []
    assert sorted(volumes(msb_home)) == ["devsy-t-cache", "devsy-t-data"]
    assert remove_volumes(msb, ["devsy-t-cache", "devsy-t-cache"]) == []  # the second is already gone: fine
    assert volumes(msb_home) == ["devsy-t-data"]


def test_failure_messages_carry_msb_stderr_and_hide_env_values(msb_home: Path, msb: MsbClient) -> None:
    args = ["run", "--detach", "--name", "devsy-x", "--pull", "never", "--env", "TOKEN=hunter2-secret",
            "--mount-dir", "/srv/private-path:/w:rw", "devsy-image:sha256-" + "0" * 64]
    with pytest.raises(MsbCommandError) as caught:
        msb.run(args, action="creating", timeout=60, secrets=["hunter2-secret", "/srv/private-path"])
    text = str(caught.value) + caught.value.stderr_tail
    assert "TOKEN=***" in text and "--mount-dir ***:/w:rw" in text
    assert "hunter2-secret" not in text and "/srv/private-path" not in text
    assert "error" in caught.value.stderr_tail


def test_commands_are_bounded_and_stop_their_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    # The pid goes to a temporary name first: the file appears whole, or not at all.
    slow = _script(tmp_path / "slow-msb",
                   f'sleep 300 & echo $! > "{pidfile}.tmp"; mv "{pidfile}.tmp" "{pidfile}"\nwait')
    client = MsbClient(MsbBinary(str(slow), (0, 7, 11)))
    # 5 s: ample for a loaded machine to start the script and its child, so the kill finds the tree it must stop.
    with pytest.raises(MsbTimeout, match="did not finish within 5 s"):
        client.run(["inspect", "x"], action="inspecting", timeout=5)
    assert pidfile.exists(), "the fake msb did not start its child within the 5 s timeout"
    grandchild = int(pidfile.read_text())
    # A SIGKILLed process dies asynchronously: give it a bounded moment to become a zombie or vanish.
    deadline = time.monotonic() + 10
    while psutil.pid_exists(grandchild) and _status(grandchild) != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the grandchild outlived the timed-out command's group kill"
        time.sleep(0.05)  # polling a process's state under a deadline, not a synchronization


def _status(pid: int) -> str:
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return psutil.STATUS_ZOMBIE  # gone is as good as dead


def test_cancelled_command_is_stopped_and_reported(tmp_path: Path) -> None:
    client = MsbClient(MsbBinary(str(_script(tmp_path / "slow-msb", "exec sleep 300")), (0, 7, 11)))
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        client.run(["start", "x"], action="starting", timeout=120, cancel=token)
    assert not [p for p in psutil.Process().children(recursive=True) if "sleep" in p.name()]


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path

