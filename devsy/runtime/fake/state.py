"""The fake runtime's state: one JSON file per workspace, named by sha256 of its id, replaced atomically.

A record is written to a temporary file in the same directory, fsynced and renamed over the old one, so a provider
killed mid-write leaves the previous record or the new one, never a torn one. Env values are never stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from devsy.errors import DriverError


@dataclass
class WorkspaceState:
    workspace_id: str
    id: str
    created_at: str
    status: str  # "running" or "stopped"
    started_at: str = ""
    image: str = ""
    user: str = ""
    remote_user: str = ""
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    mounts: list[dict[str, str]] = field(default_factory=list)
    env_keys: list[str] = field(default_factory=list)


class StateStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise DriverError(f"cannot create the fake runtime's state directory: {exc.strerror}",
                              hint="pass a writable --state-dir") from exc

    def path(self, workspace_id: str) -> Path:
        return self.directory / (hashlib.sha256(workspace_id.encode()).hexdigest() + ".json")

    def load(self, workspace_id: str) -> WorkspaceState | None:
        try:
            raw = json.loads(self.path(workspace_id).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise DriverError(f"the fake runtime's record of workspace {workspace_id} is unreadable: {exc}",
                              hint="delete the workspace, or remove the state directory") from exc
        return WorkspaceState(**raw)

    def save(self, state: WorkspaceState) -> None:
        target = self.path(state.workspace_id)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
        try:
            with os.fdopen(fd, "w") as stream:
                json.dump(asdict(state), stream)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def delete(self, workspace_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(workspace_id).unlink()
