"""Host folders devsy writes to: created race-free, and checked for writability before anything is created."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from devsy.errors import WorkspaceError


def ensure_dir(path: Path, what: str) -> None:
    """Create `path` (and parents) if missing; another process creating it at the same moment is fine."""
    try:
        # exist_ok, not exists()-then-mkdir: two first `devsy up`s race to create ~/.ssh or $DEVSY_HOME/locks.
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable(path, what, exc) from exc


def check_writable(directory: Path, what: str) -> None:
    """Fail now, before `devsy up` creates anything, if a file cannot be written in `directory`."""
    ensure_dir(directory, what)
    try:
        # A real write, not os.access: access() passes for root on a full disk, and on some network filesystems.
        fd, name = tempfile.mkstemp(dir=directory, prefix=".devsy-write-check.", suffix=".tmp")
    except OSError as exc:
        raise unwritable(directory, what, exc) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise unwritable(directory, what, exc) from exc
    finally:
        Path(name).unlink(missing_ok=True)


def unwritable(path: Path, what: str, exc: OSError) -> WorkspaceError:
    """The error for a folder devsy cannot create or write (full disk, read-only, a file in the way, permissions)."""
    return WorkspaceError(
        f"cannot write {what} in {path}: {exc.strerror or exc}",
        f"free disk space, or make {path} a writable folder (check its permissions and that no parent is a file or "
        "a read-only mount), then retry",
    )


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step: a reader sees the old file or the new one, never half of either."""
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
