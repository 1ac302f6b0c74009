"""The owned loopback git server (fixtures/git_server.py): real clones through git http-backend, a stall that holds
a partial pack until aborted, and a bounded stop that leaves no thread or backend process behind."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import psutil
import pytest

from fixtures.git_server import THREAD_PREFIX, UPLOAD_PACK, GitServer, make_bare_repo

BLOB = os.urandom(1 << 20)  # incompressible: the pack is over 1 MiB, so a stall at 64 KiB is mid-pack
WAIT_S = 60.0


@pytest.fixture
def server(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    make_bare_repo(root / "repo.git", {"README.md": b"fixture\n", "blob.bin": BLOB}, tmp_path / "work")
    git_server = GitServer(root).start()
    yield git_server
    git_server.stop()


def _clone(url: str, dest: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["git", "clone", "-q", url, str(dest)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))


def test_clone_is_served_by_git_http_backend(server: GitServer, tmp_path: Path) -> None:
    proc = _clone(server.url("repo.git"), tmp_path / "copy")
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0, err
    assert (tmp_path / "copy" / "blob.bin").read_bytes() == BLOB
    assert server.count(UPLOAD_PACK) >= 1, "the clone did not go through upload-pack"


def test_stall_holds_a_partial_pack_until_abort(server: GitServer, tmp_path: Path) -> None:
    server.stall_next_pack(after=64 * 1024)
    proc = _clone(server.url("repo.git"), tmp_path / "stalled")
    try:
        assert server.stalled.wait(WAIT_S), f"no pack response reached the stall: {server.errors}"
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)  # held, not failed: the client is still waiting for the rest of the pack
        server.abort()
        _, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, "a clone whose pack was cut short succeeded"
    assert not (tmp_path / "stalled").exists(), "git left its failed clone"  # git's own cleanup of its target
    retry = _clone(server.url("repo.git"), tmp_path / "retry")  # a stall is armed once
    _, err = retry.communicate(timeout=WAIT_S)
    assert retry.returncode == 0 and (tmp_path / "retry" / "blob.bin").read_bytes() == BLOB, err


def _cmdline(process: psutil.Process) -> str:
    """Its command line, or "" for a child (a git helper) that ended between listing and asking."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def test_stop_ends_a_stalled_connection_and_its_backend(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    make_bare_repo(root / "repo.git", {"blob.bin": BLOB}, tmp_path / "work")
    git_server = GitServer(root).start()
    git_server.stall_next_pack(after=64 * 1024)
    proc = _clone(git_server.url("repo.git"), tmp_path / "stalled")
    try:
        assert git_server.stalled.wait(WAIT_S), git_server.errors
        backends = [p for p in psutil.Process().children(recursive=True) if "http-backend" in _cmdline(p)]
        assert backends, "the stalled request has no git http-backend process"
        git_server.stop(timeout=10.0)
        proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert not [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]
    gone, alive = psutil.wait_procs(backends, timeout=10)
    assert not alive, f"backend processes left after stop(): {alive}"
