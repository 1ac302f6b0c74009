"""devsy's blocks in an OpenSSH config file, delimited by `# >>> devsy workspace <id> >>>` / `# <<< ... <<<`."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable

_BEGIN = re.compile(r"^# >>> devsy workspace (\S+) >>>\s*$")
_END = "# <<< devsy workspace {id} <<<"


def block_ids(path: Path) -> list[str]:
    """Workspace ids that have a block in `path` (empty when the file does not exist)."""
    if not path.exists():
        return []
    return [m.group(1) for line in path.read_text().splitlines() if (m := _BEGIN.match(line))]


def block_text(path: Path, workspace_id: str) -> str:
    """The block of one workspace, delimiters included ('' when absent)."""
    lines = path.read_text().splitlines() if path.exists() else []
    inside, kept = False, []
    for line in lines:
        match = _BEGIN.match(line)
        if match and match.group(1) == workspace_id:
            inside = True
        if inside:
            kept.append(line)
            if line.strip() == _END.format(id=workspace_id):
                break
    return "\n".join(kept)


def remove_blocks(path: Path, owned: Callable[[str], bool]) -> list[str]:
    """Remove every block whose workspace id `owned` accepts; return the ids removed. Other text is kept as is."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines(keepends=True)
    result: list[str] = []
    removed: list[str] = []
    current: str | None = None
    for line in lines:
        match = _BEGIN.match(line.rstrip("\n"))
        if current is None and match and owned(match.group(1)):
            current = match.group(1)
            removed.append(current)
            continue
        if current is not None:
            if line.strip() == _END.format(id=current):
                current = None
            continue
        result.append(line)
    if removed:
        tmp = path.with_name(f".{path.name}.harness-sweep")
        tmp.write_text("".join(result))
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    return removed
