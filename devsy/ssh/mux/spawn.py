"""Starting a workspace's SSH master for the first `devsy ssh` that finds none (at most one at a time)."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from devsy import errors, process_tree
from devsy.workspace.paths import workspace_paths

START_TIMEOUT_S = 300.0  # a master's first connection may have to deliver the agent again
_STOP_WAIT_S = 15.0
_LOCK_POLL_S = 0.5  # how often a waiter for the start lock looks at its cancellation (filelock itself polls)


def master_log(home: Path, workspace_id: str) -> Path:
    """The master's log, in the workspace's folder (removed with it)."""
    return workspace_paths(home, workspace_id).root / "ssh-master.log"


def start_master(home: Path, record: dict, signals: Any,
                 connect: Callable[[Path, dict], tuple[socket.socket, int] | None]) -> tuple[socket.socket, int]:
    """Start the master unless another `devsy ssh` just did, and return a connection to it and its pid."""
    workspace_id = record["id"]
    # Beside the workspace's own lock (not held here: `up` or `stop` may hold it for minutes).
    lock_path = workspace_paths(home, workspace_id).lock.with_name(f"{workspace_id}.ssh-master.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path))
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            lock.acquire(timeout=_LOCK_POLL_S)
            break
        except Timeout:
            if signals.received:
                raise errors.Cancelled("cancelled while another devsy ssh was starting the SSH master") from None
            if time.monotonic() > deadline:
                raise errors.LockTimeout(f"waited {START_TIMEOUT_S:g}s for another devsy ssh to start the SSH master "
                                         f"of workspace {workspace_id}",
                                         hint=f"retry; its log is {master_log(home, workspace_id)}") from None
    try:
        found = connect(home, record)  # someone else started it while we waited
        if found is None:
            _spawn_and_wait(home, workspace_id, signals, deadline)
            found = connect(home, record)
        if found is None:
            raise errors.DevsyError(f"the SSH master of workspace {workspace_id} reported ready but does not answer",
                                    hint=f"retry with DEVSY_SSH_MUX=0, and read {master_log(home, workspace_id)}")
        return found
    finally:
        lock.release()


def _spawn_and_wait(home: Path, workspace_id: str, signals: Any, deadline: float) -> None:
    ready_r, ready_w = os.pipe()
    try:
        # Its own session: a Ctrl-C in this terminal is for this command, not for the master that outlives it.
        # stderr is inherited only so the master can report its start-up (agent delivery) here; it lets go of it
        # before it reports ready.
        proc = subprocess.Popen([sys.executable, "-m", "devsy.ssh.mux.master", "--home", str(home),
                                 "--workspace", workspace_id, "--ready-fd", str(ready_w)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(ready_w,),
                                start_new_session=True)
    finally:
        os.close(ready_w)
    try:
        line = _read_ready(ready_r, signals, deadline)
    except BaseException:
        _stop(proc)
        raise
    finally:
        os.close(ready_r)
    if line is None:
        code = _reap(proc)
        raise errors.DevsyError(f"the SSH master of workspace {workspace_id} exited during start-up (exit {code})",
                                hint=f"read {master_log(home, workspace_id)}, or retry with DEVSY_SSH_MUX=0")
    report = json.loads(line)
    if not report.get("ok"):
        _reap(proc)  # it exits right after reporting
        raise errors.ReportedError(str(report.get("kind", "")), report.get("exit_code", 1),
                                   str(report.get("message", "")), str(report.get("hint", "")))


def _read_ready(fd: int, signals: Any, deadline: float) -> bytes | None:
    """The master's one-line report, or None if it closed the pipe without one (it died)."""
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.DevsyError(f"the SSH master did not start within {START_TIMEOUT_S:g}s",
                                    hint="retry with DEVSY_SSH_MUX=0 to see where it stops")
        ready, _, _ = select.select([fd, signals.wake_r], [], [], remaining)
        if signals.received:
            raise errors.Cancelled("cancelled while the SSH master was starting")
        if fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            data += chunk
    return data


def _stop(proc: subprocess.Popen) -> None:
    """Stop a master that is still starting: SIGTERM cancels its work (the driver cleans up in the guest)."""
    process_tree.stop_child(proc, group=False, grace=_STOP_WAIT_S, kill_wait=_STOP_WAIT_S)


def _reap(proc: subprocess.Popen) -> int | None:
    """Its exit code, once it exited; SIGKILL if it does not within the bound (None if even that did not end it)."""
    process_tree.stop_child(proc, group=False, term=False, grace=_STOP_WAIT_S, kill_wait=_STOP_WAIT_S)
    return proc.returncode
