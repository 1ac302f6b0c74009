"""Per-workspace Host blocks in an OpenSSH config file, between markers, leaving everything else byte-exact."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from devsy.errors import LockTimeout, WorkspaceError
from devsy.workspace.fsdirs import check_writable, ensure_dir, unwritable
from devsy.workspace.ids import validate_workspace_id

HOST_SUFFIX = ".devsy"
_LOCK_TIMEOUT = 30.0  # writers hold the lock for one read-modify-write, never long
_START = re.compile(r"^# >>> devsy workspace (?P<id>\S+) >>>$")
_END = re.compile(r"^# <<< devsy workspace (?P<id>\S+) <<<$")
_OPTION_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
# OpenSSH applies the first value it finds for an option, so our block must come before the user's `Host *`.
_SECTION_START = re.compile(r"^\s*(?:host|match)(?:\s|=)", re.IGNORECASE)


def start_marker(workspace_id: str) -> str:
    return f"# >>> devsy workspace {workspace_id} >>>"


def end_marker(workspace_id: str) -> str:
    return f"# <<< devsy workspace {workspace_id} <<<"


def host_alias(workspace_id: str) -> str:
    """The name `ssh` uses for a workspace: `<id>.devsy`."""
    return f"{workspace_id}{HOST_SUFFIX}"


def render_block(workspace_id: str, options: dict[str, str]) -> str:
    """The marked block for a workspace: `Host <id>.devsy` and one indented line per option."""
    validate_workspace_id(workspace_id)
    lines = [start_marker(workspace_id), f"Host {host_alias(workspace_id)}"]
    for key, value in options.items():
        # A newline in a value would let it write arbitrary config lines outside the block's intent.
        if not _OPTION_KEY.match(key) or not value or any(ch in value for ch in "\r\n\0"):
            raise WorkspaceError(
                f"ssh config option {key!r} for workspace {workspace_id} is not a single-line keyword and value",
                "this is a bug in devsy; please report it with the command you ran",
            )
        lines.append(f"  {key} {value}")
    lines.append(end_marker(workspace_id))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class _Block:
    workspace_id: str
    start: int  # index of the start marker line
    end: int  # index of the end marker line (inclusive)


@dataclass(frozen=True)
class _Problem:
    line: int  # index of the first marker line of this workspace that is wrong
    what: str


@dataclass
class _Parsed:
    """The well-formed blocks, and per workspace id what is wrong with the markers of the ones that are not."""

    blocks: list[_Block]
    broken: dict[str, _Problem]
    marker_lines: list[int]  # every marker line, well-formed or not

    def block_of(self, workspace_id: str, path: Path) -> _Block | None:
        """The workspace's block; a WorkspaceError if its markers are broken (guessing could delete user lines)."""
        problem = self.broken.get(workspace_id)
        if problem is not None:
            raise _broken(path, problem.line, problem.what)
        return next((b for b in self.blocks if b.workspace_id == workspace_id), None)


def write_block(config_path: Path, workspace_id: str, options: dict[str, str]) -> bool:
    """Insert or replace the workspace's block; True if the file changed."""
    block = render_block(workspace_id, options)
    with _locked(config_path):
        target = _real_path(config_path)
        text = _read(target)
        lines = _split_lines(text)
        parsed = _parse(lines)
        existing = parsed.block_of(workspace_id, target)
        if existing is not None:
            if "".join(lines[existing.start : existing.end + 1]) == block:
                return False
            new_lines = lines[: existing.start] + [block] + lines[existing.end + 1 :]
        else:
            at = _insertion_index(lines, parsed)
            before = lines[:at]
            if before and not before[-1].endswith("\n"):
                before[-1] += "\n"  # only ever at end of file: the marker needs a line of its own
            new_lines = before + [block] + lines[at:]
        _write_atomic(target, "".join(new_lines))
        return True


def remove_block(config_path: Path, workspace_id: str) -> bool:
    """Remove the workspace's block; True if there was one. A missing file is fine."""
    validate_workspace_id(workspace_id)
    with _locked(config_path):
        target = _real_path(config_path)
        if not target.exists():
            return False
        lines = _split_lines(_read(target))
        existing = _parse(lines).block_of(workspace_id, target)
        if existing is None:
            return False
        _write_atomic(target, "".join(lines[: existing.start] + lines[existing.end + 1 :]))
        return True


def check_block_writable(config_path: Path, workspace_id: str) -> None:
    """Fail before `devsy up` creates anything if it could not write the workspace's block afterwards."""
    validate_workspace_id(workspace_id)
    target = _real_path(config_path)
    _parse(_split_lines(_read(target))).block_of(workspace_id, target)
    check_writable(target.parent, "the ssh config")
    check_writable(Path(f"{config_path}.devsy.lock").parent, "the ssh config lock")


def read_block(config_path: Path, workspace_id: str) -> str | None:
    """The workspace's block as written (markers included), or None."""
    target = _real_path(config_path)
    lines = _split_lines(_read(target))
    block = _parse(lines).block_of(workspace_id, target)
    return None if block is None else "".join(lines[block.start : block.end + 1])


def list_blocks(config_path: Path) -> list[str]:
    """Ids of all devsy blocks in the file, in file order; any broken marker in the file is an error."""
    target = _real_path(config_path)
    parsed = _parse(_split_lines(_read(target)))
    if parsed.broken:
        problem = min(parsed.broken.values(), key=lambda p: p.line)
        raise _broken(target, problem.line, problem.what)
    return [b.workspace_id for b in parsed.blocks]


def _parse(lines: list[str]) -> _Parsed:
    """Find every block. Broken markers are recorded against their workspace only: one hand-edited block must not
    stop devsy from editing the blocks of other workspaces, whose lines it can still tell apart."""
    candidates: list[_Block] = []
    broken: dict[str, _Problem] = {}
    markers: list[int] = []

    def mark(workspace_id: str, index: int, what: str) -> None:
        broken.setdefault(workspace_id, _Problem(index, what))

    open_id: str | None = None
    open_at = 0
    for index, line in enumerate(lines):
        stripped = line.strip()
        start, end = _START.match(stripped), _END.match(stripped)
        if start:
            markers.append(index)
            if open_id is not None:
                mark(open_id, open_at, f"the block of workspace {open_id!r} has no end marker")
            open_id, open_at = start.group("id"), index
        elif end:
            markers.append(index)
            end_id = end.group("id")
            if open_id is not None and end_id == open_id:
                candidates.append(_Block(open_id, open_at, index))
            else:
                if open_id is not None:
                    mark(open_id, open_at, f"the block of workspace {open_id!r} has no end marker")
                mark(end_id, index, f"end marker of workspace {end_id!r} has no start marker")
            open_id = None
    if open_id is not None:
        mark(open_id, open_at, f"the block of workspace {open_id!r} has no end marker")
    counts: dict[str, int] = {}
    for block in candidates:
        counts[block.workspace_id] = counts.get(block.workspace_id, 0) + 1
    for block in candidates:
        if counts[block.workspace_id] > 1:
            first = next(b for b in candidates if b.workspace_id == block.workspace_id)
            mark(block.workspace_id, first.start, f"workspace {block.workspace_id!r} has more than one block")
    return _Parsed([b for b in candidates if b.workspace_id not in broken], broken, markers)


def _broken(path: Path, index: int, what: str) -> WorkspaceError:
    return WorkspaceError(
        f"ssh config {path} line {index + 1}: {what}",
        "fix the devsy markers in that file by hand (or remove the broken block), then retry",
    )


def _insertion_index(lines: list[str], parsed: _Parsed) -> int:
    """Before the user's first Host/Match section (top-level options stay global), after devsy's blocks there;
    never after a broken marker, so a new block never lands inside a broken one."""
    inside = {index for block in parsed.blocks for index in range(block.start, block.end + 1)}
    first_section = next(
        (i for i, line in enumerate(lines)
         if i not in inside and (_SECTION_START.match(line) or i in parsed.marker_lines)), len(lines)
    )
    earlier = [block for block in parsed.blocks if block.start < first_section]
    return earlier[-1].end + 1 if earlier else first_section


def _split_lines(text: str) -> list[str]:
    """Lines with their "\n" kept, so joining them is byte-exact (str.splitlines would also split on \f, \x1c...)."""
    lines = [part + "\n" for part in text.split("\n")]
    lines[-1] = lines[-1][:-1]  # the text after the last newline has none
    if not lines[-1]:
        lines.pop()
    return lines


def _read(path: Path) -> str:
    try:
        # surrogateescape: bytes that are not UTF-8 survive the round trip unchanged.
        return path.read_bytes().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise WorkspaceError(
            f"cannot read ssh config {path}: {exc.strerror or exc}",
            f"check that {path} is a readable file in a folder (no parent of it may be a regular file), or point "
            "DEVSY_SSH_CONFIG at another file",
        ) from exc


def _real_path(config_path: Path) -> Path:
    # A dotfile manager often symlinks ~/.ssh/config; replacing the link would silently detach it.
    return Path(os.path.realpath(config_path))


def _write_atomic(path: Path, text: str) -> None:
    ensure_dir(path.parent, "the ssh config")
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600  # ssh refuses config files others can write; keep it private
    try:
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise unwritable(path.parent, "the ssh config", exc) from exc
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8", "surrogateescape"))
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WorkspaceError(
            f"cannot write ssh config {path}: {exc.strerror or exc}",
            f"check the permissions of {path.parent} and free disk space, then retry",
        ) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def _locked(config_path: Path) -> Iterator[None]:
    """Hold the cross-process writer lock `<config>.devsy.lock` for one read-modify-write."""
    lock_path = Path(f"{config_path}.devsy.lock")
    ensure_dir(lock_path.parent, "the ssh config lock")
    lock = FileLock(lock_path, timeout=_LOCK_TIMEOUT)
    try:
        lock.acquire()
    except Timeout as exc:  # before OSError: filelock's Timeout is a TimeoutError, an OSError
        raise LockTimeout(
            f"another process held {lock_path} for over {_LOCK_TIMEOUT:g}s while editing the ssh config {config_path}",
            "wait for other devsy commands to finish and retry; look for a hung devsy process if none should run",
        ) from exc
    except OSError as exc:
        raise unwritable(lock_path.parent, "the ssh config lock", exc) from exc
    try:
        yield
    finally:
        lock.release()
