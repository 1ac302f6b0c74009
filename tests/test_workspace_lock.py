from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy.errors import LockTimeout, UsageError
from devsy.workspace.lock import lock_timeout_from_env, read_holder, workspace_lock
from devsy.workspace.paths import WorkspacePaths, workspace_paths

# The holder process reports "locked" once it holds the lock, then releases when told to on stdin.
HOLDER = """
import sys
from pathlib import Path
from devsy.workspace.lock import workspace_lock
from devsy.workspace.paths import workspace_paths
with workspace_lock(workspace_paths(Path(sys.argv[1]), "proj"), timeout=5, command="devsy up proj"):
    print("locked", flush=True)
    sys.stdin.readline()
print("released", flush=True)
"""


@pytest.fixture
def paths(tmp_path: Path) -> WorkspacePaths:
    return workspace_paths(tmp_path, "proj")


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def test_second_holder_times_out_naming_the_first(paths: WorkspacePaths, holder: subprocess.Popen[str]) -> None:
    with pytest.raises(LockTimeout) as info:
        with workspace_lock(paths, timeout=0.2, command="devsy delete proj"):
            pytest.fail("got a lock another process holds")
    message = info.value.message
    assert f"pid {holder.pid}" in message and "devsy up proj" in message and "since 20" in message
    assert f"ps -p {holder.pid}" in info.value.hint and "wait" in info.value.hint


def test_waiter_gets_the_lock_once_the_holder_releases(paths: WorkspacePaths, holder: subprocess.Popen[str]) -> None:
    acquired = threading.Event()
    seen: list[object] = []

    def wait_for_lock() -> None:
        with workspace_lock(paths, timeout=30, command="devsy up proj"):
            seen.append(read_holder(paths.lock_holder))
            acquired.set()

    waiter = threading.Thread(target=wait_for_lock)
    waiter.start()
    assert not acquired.is_set()  # the holder has not been told to release yet
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.write("release\n")
    holder.stdin.flush()
    assert holder.stdout.readline() == "released\n"
    assert acquired.wait(timeout=30)
    waiter.join(timeout=30)
    assert seen and getattr(seen[0], "pid") == os.getpid()


def test_holder_info_is_written_while_held_and_removed_after(paths: WorkspacePaths) -> None:
    with workspace_lock(paths, timeout=1, command="devsy stop proj") as held:
        info = read_holder(paths.lock_holder)
        assert info == held and info.pid == os.getpid() and info.command == "devsy stop proj"
        # A second lock object in the same process is refused as well.
        with pytest.raises(LockTimeout, match=f"pid {os.getpid()}"):
            with workspace_lock(paths, timeout=0, command="devsy up proj"):
                pass
    assert not paths.lock_holder.exists()
    with workspace_lock(paths, timeout=0, command="again"):
        pass


def test_lock_is_released_when_the_block_raises(paths: WorkspacePaths) -> None:
    with pytest.raises(RuntimeError):
        with workspace_lock(paths, timeout=1, command="devsy up proj"):
            raise RuntimeError("boom")
    with workspace_lock(paths, timeout=0, command="devsy up proj"):
        pass


def test_lock_timeout_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEVSY_LOCK_TIMEOUT", raising=False)
    assert lock_timeout_from_env() == 300
    monkeypatch.setenv("DEVSY_LOCK_TIMEOUT", "2.5")
    assert lock_timeout_from_env() == 2.5
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv("DEVSY_LOCK_TIMEOUT", bad)
        with pytest.raises(UsageError, match="DEVSY_LOCK_TIMEOUT") as info:
            lock_timeout_from_env()
        assert "DEVSY_LOCK_TIMEOUT" in info.value.hint


def test_env_timeout_is_used_by_default(
    paths: WorkspacePaths, holder: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEVSY_LOCK_TIMEOUT", "0")
    with pytest.raises(LockTimeout, match="waited 0s"):
        with workspace_lock(paths, command="devsy up proj"):
            pass
