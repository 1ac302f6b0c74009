"""The per-workspace lock: one devsy command at a time changes a workspace."""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from devsy.bounded_wait import WaitTimeout, poll_until
from devsy.errors import LockTimeout, UsageError, WorkspaceError
from devsy.workspace.fsdirs import ensure_dir
from devsy.workspace.paths import WorkspacePaths
from devsy.workspace.record import utc_now_rfc3339

LOCK_TIMEOUT_ENV = "DEVSY_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 300.0
WAIT_NOTICE_AFTER_S = 3.0  # a wait longer than this is explained on stderr: silence for 300 s looks like a hang
_POLL_S = 0.05  # flock has no timeout of its own; a bounded poll gives one (filelock polls the same way)


@dataclass(frozen=True)
class LockHolder:
    """Who holds a workspace lock, written beside it so a waiter that times out can say who."""

    pid: int
    command: str
    started_at: str


def lock_timeout_from_env() -> float:
    """Seconds to wait for a workspace lock: `$DEVSY_LOCK_TIMEOUT`, default 300."""
    raw = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UsageError(
            f"{LOCK_TIMEOUT_ENV}={raw!r} is not a number of seconds",
            f"set {LOCK_TIMEOUT_ENV} to a non-negative number such as 300, or unset it",
        )
    return value


@contextmanager
def workspace_lock(paths: WorkspacePaths, *, timeout: float | None = None, command: str) -> Iterator[LockHolder]:
    """Hold the workspace lock for the block; LockTimeout names the holder if it is not free within `timeout`."""
    wait = lock_timeout_from_env() if timeout is None else timeout
    if not math.isfinite(wait) or wait < 0:
        raise ValueError(f"lock timeout must be a finite number >= 0, got {wait!r}")
    ensure_dir(paths.lock.parent, "the workspace lock")
    fd = _acquire(paths, wait)
    try:
        holder = LockHolder(pid=os.getpid(), command=command, started_at=utc_now_rfc3339())
        _write_holder(paths.lock_holder, holder)
        try:
            yield holder
        finally:
            # Removed while still locked, so it never erases the next holder's info.
            paths.lock_holder.unlink(missing_ok=True)
            _remove_if_obsolete(paths)
    finally:
        os.close(fd)  # releases the flock


def _remove_if_obsolete(paths: WorkspacePaths) -> None:
    """Unlink the lock file once its workspace is gone (deleted, or a first `up` rolled back), else they pile up.

    Done last, still holding the flock, with nothing left to protect. A waiter that then gets the flock on the
    unlinked file sees that the path no longer names it and retries on the path (`_acquire`); one that opens the path
    afterwards makes a new file. Either way two processes never both hold the lock while one has work left in it.
    """
    if not paths.root.exists():
        with contextlib.suppress(OSError):  # a lock file left behind costs nothing; failing the command would
            paths.lock.unlink(missing_ok=True)


def _acquire(paths: WorkspacePaths, wait: float) -> int:
    """Lock `paths.lock` (flock, exclusive) within `wait` seconds; return the open descriptor that holds it."""
    started = time.monotonic()
    noticed = False

    def try_lock() -> int | None:
        nonlocal noticed
        fd = _try_lock(paths)
        if fd is None and not noticed and time.monotonic() - started >= WAIT_NOTICE_AFTER_S:
            noticed = True
            print(f"devsy: {_waiting_for(paths)}", file=sys.stderr, flush=True)
        return fd

    try:
        fd = poll_until(try_lock, lambda fd: fd is not None, timeout=wait, interval=_POLL_S,
                        what=f"the lock of workspace {paths.root.name}")
    except WaitTimeout:
        raise _timeout_error(paths, wait) from None
    assert fd is not None
    return fd


def _try_lock(paths: WorkspacePaths) -> int | None:
    """One attempt: the descriptor holding the lock at the path, or None while another process holds it."""
    while True:
        try:
            fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise WorkspaceError(
                f"cannot open the lock file {paths.lock}: {exc.strerror or exc}",
                f"free disk space or fix the permissions of {paths.lock.parent}, then retry",
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if _names_this_file(paths.lock, fd):
            return fd
        os.close(fd)  # locked a file `devsy delete` unlinked meanwhile: the lock is the one at the path now


def _names_this_file(path: Path, fd: int) -> bool:
    try:
        on_path = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (on_path.st_dev, on_path.st_ino) == (held.st_dev, held.st_ino)


def _waiting_for(paths: WorkspacePaths) -> str:
    holder = read_holder(paths.lock_holder)
    if holder is None:
        return f"waiting for another devsy command on workspace {paths.root.name} to finish..."
    return f"waiting for `{holder.command}` (pid {holder.pid}, since {holder.started_at}) to finish..."


def read_holder(path: Path) -> LockHolder | None:
    """The holder info beside a lock, or None if missing or unreadable (it is advisory)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return LockHolder(pid=int(data["pid"]), command=str(data["command"]), started_at=str(data["started_at"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _write_holder(path: Path, holder: LockHolder) -> None:
    # Atomic, so a waiter reading it at timeout never sees half a file. Advisory: a full disk must not stop the
    # command holding the lock (`devsy delete` is how a user frees space), so a failed write only loses the info.
    try:
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(holder), handle)
        os.replace(tmp_name, path)
    except OSError:
        Path(tmp_name).unlink(missing_ok=True)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _timeout_error(paths: WorkspacePaths, waited: float) -> LockTimeout:
    workspace_id = paths.root.name
    holder = read_holder(paths.lock_holder)
    if holder is None:
        return LockTimeout(
            f"workspace {workspace_id} is locked by another process (holder unknown); waited {waited:g}s",
            f"wait for the other devsy command to finish and retry, or raise {LOCK_TIMEOUT_ENV}",
        )
    return LockTimeout(
        f"workspace {workspace_id} is locked by pid {holder.pid} running `{holder.command}` "
        f"since {holder.started_at}; waited {waited:g}s",
        f"wait for it to finish and retry (or raise {LOCK_TIMEOUT_ENV}); "
        f"check whether pid {holder.pid} is still alive with `ps -p {holder.pid}`",
    )
