"""The OpenSSH config entry `devsy up` writes, so `ssh <id>.devsy` works without prompts.

OpenSSH reaches the workspace through ProxyCommand (`devsy ssh <id> --stdio`), so there is no host key to trust
across recreations and no port to forward; host key checking is off for this alias only.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from devsy.workspace.record import WorkspaceRecord
from devsy.workspace.sshconfig import remove_block, write_block


def entry_options(record: WorkspaceRecord, home: Path) -> dict[str, str]:
    proxy = shlex.join([sys.executable, "-m", "devsy", "--home", str(home), "ssh", record.id, "--stdio"])
    return {
        "ProxyCommand": proxy,
        "User": record.remote_user or "root",
        "StrictHostKeyChecking": "no",
        "UserKnownHostsFile": "/dev/null",
        "LogLevel": "error",
    }


def write_ssh_entry(record: WorkspaceRecord, home: Path) -> bool:
    """Write (or refresh) the workspace's block; True when the file changed."""
    return write_block(Path(record.ssh_config), record.id, entry_options(record, home))


def remove_ssh_entry(record: WorkspaceRecord) -> bool:
    return remove_block(Path(record.ssh_config), record.id)
