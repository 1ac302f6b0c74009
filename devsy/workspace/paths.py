"""Where the host keeps workspace state: records, managed content, locks, and the SSH config file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class WorkspacePaths(NamedTuple):
    """Every host path belonging to one workspace id. (A NamedTuple, not a dataclass: every `devsy ssh` reads these,
    and importing dataclasses would be a seventh of its start-up.)"""

    root: Path  # $HOME/workspaces/<id>
    record: Path  # $HOME/workspaces/<id>/workspace.json
    content: Path  # $HOME/workspaces/<id>/content (cloned sources devsy manages)
    lock: Path  # $HOME/locks/<id>.lock
    lock_holder: Path  # $HOME/locks/<id>.lock.holder.json (who holds the lock, for timeout messages)


def devsy_home() -> Path:
    """The devsy state directory: `$DEVSY_HOME`, else `~/.devsy`."""
    raw = os.environ.get("DEVSY_HOME", "")
    return Path(raw).expanduser() if raw else Path.home() / ".devsy"


def workspace_paths(home: Path, workspace_id: str) -> WorkspacePaths:
    """Lay out the paths of `workspace_id` under `home`; the id must already be validated."""
    root = home / "workspaces" / workspace_id
    # Locks live outside the workspace folder so deleting a workspace never deletes the lock a waiter is holding.
    lock = home / "locks" / f"{workspace_id}.lock"
    return WorkspacePaths(
        root=root,
        record=root / "workspace.json",
        content=root / "content",
        lock=lock,
        lock_holder=lock.with_name(f"{workspace_id}.lock.holder.json"),
    )


def ssh_config_path() -> Path:
    """The OpenSSH config file devsy writes its Host blocks to: `$DEVSY_SSH_CONFIG`, else `~/.ssh/config`."""
    raw = os.environ.get("DEVSY_SSH_CONFIG", "")
    return Path(raw).expanduser() if raw else Path.home() / ".ssh" / "config"
