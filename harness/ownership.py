"""What a harness run owns: its run id, the names derived from it, and the directories it may create and remove.

Every workspace id a run creates starts with `hx<8 hex of sha256(run id)>-`, so the backend label
`dev.devsy.workspace` identifies the owning run; every directory lives under `<root>/runs/<run id>/`.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT_ENV = "DEVSY_HARNESS_ROOT"
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
OWNED_WORKSPACE = re.compile(r"^hx[0-9a-f]{8}-[a-z0-9-]+$")
# Label the harness puts on Docker objects it creates itself (probes, test fixtures), never on devsy's.
HARNESS_RUN_LABEL = "dev.devsy.harness.run"
WORKSPACE_ID_MAX = 63


class RunIdError(ValueError):
    """A run id that cannot name a directory safely."""


def harness_root() -> Path:
    """Where every run's directories live: `$DEVSY_HARNESS_ROOT`, else `~/.cache/devsy-harness`."""
    raw = os.environ.get(ROOT_ENV, "")
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "devsy-harness"


def new_run_id() -> str:
    return uuid.uuid4().hex


def check_run_id(run_id: str) -> str:
    if not RUN_ID_PATTERN.match(run_id):
        raise RunIdError(f"run id {run_id!r} must match {RUN_ID_PATTERN.pattern}")
    return run_id


def _hex(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")


@dataclass(frozen=True)
class RunPaths:
    """The directories and files of one run (all under `run_dir`) plus its lock file beside it."""

    run_id: str
    root: Path

    @property
    def run_dir(self) -> Path:
        return self.root / "runs" / self.run_id

    @property
    def lock_file(self) -> Path:
        # Beside the run dir, so sweeping the dir never deletes a lock someone holds.
        return self.root / "runs" / f"{self.run_id}.lock"

    @property
    def devsy_home(self) -> Path:
        return self.run_dir / "home"

    @property
    def ssh_config(self) -> Path:
        return self.run_dir / "ssh_config"

    @property
    def probes_dir(self) -> Path:
        return self.run_dir / "probes"

    @property
    def session_file(self) -> Path:
        return self.run_dir / "session.json"

    def case_dir(self, result_id: str) -> Path:
        return self.run_dir / "cases" / f"{_slug(result_id)}-{_hex(result_id, 6)}"


@dataclass(frozen=True)
class Ownership:
    """Owned names for one run."""

    run_id: str

    @property
    def workspace_prefix(self) -> str:
        return f"hx{_hex(self.run_id, 8)}-"

    def owns_workspace(self, workspace_id: str) -> bool:
        return workspace_id.startswith(self.workspace_prefix)

    def workspace_id(self, case_id: str, provider_id: str, suffix: str = "") -> str:
        """A stable, valid (1..63 of [a-z0-9-]) workspace id for this run, case, provider and optional suffix."""
        key = f"{self.run_id}|{case_id}|{provider_id}|{suffix}"
        tail = f"-{_hex(key, 6)}"
        case_name = case_id.split("/", 1)[-1]
        readable = _slug("-".join(part for part in (case_name, suffix, provider_id) if part))
        room = WORKSPACE_ID_MAX - len(self.workspace_prefix) - len(tail)
        return f"{self.workspace_prefix}{readable[:room].strip('-')}{tail}"


def is_owned_workspace(workspace_id: str) -> bool:
    """True for any workspace id shaped like one a harness run created (any run)."""
    return bool(OWNED_WORKSPACE.match(workspace_id))
