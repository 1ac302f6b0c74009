"""The per-workspace lock: one devsy command at a time changes a workspace."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from devsy.errors import LockTimeout, UsageError
from devsy.workspace.paths import WorkspacePaths
from devsy.workspace.record import utc_now_rfc3339

LOCK_TIMEOUT_ENV = "DEVSY_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 300.0


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
        # filelock treats a negative timeout as "forever"; nothing here may wait forever.
        raise ValueError(f"lock timeout must be a finite number >= 0, got {wait!r}")
    paths.lock.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = FileLock(paths.lock, timeout=wait)
    try:
        lock.acquire()
    except Timeout as exc:
        raise _timeout_error(paths, wait) from exc
    try:
        holder = LockHolder(pid=os.getpid(), command=command, started_at=utc_now_rfc3339())
        _write_holder(paths.lock_holder, holder)
        try:
            yield holder
        finally:
            # Removed while still locked, so it never erases the next holder's info.
            paths.lock_holder.unlink(missing_ok=True)
    finally:
        lock.release()


def read_holder(path: Path) -> LockHolder | None:
    """The holder info beside a lock, or None if missing or unreadable (it is advisory)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return LockHolder(pid=int(data["pid"]), command=str(data["command"]), started_at=str(data["started_at"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _write_holder(path: Path, holder: LockHolder) -> None:
    # Atomic, so a waiter reading it at timeout never sees half a file.
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(holder), handle)
        os.replace(tmp_name, path)
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
