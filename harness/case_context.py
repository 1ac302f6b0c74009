"""Everything one case (a result id) owns while it runs: names, directories, deadline, cleanup and its record data."""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from devsy.errors import NotFound, WorkspaceNotFound
from harness.backends import BackendInspector, inspector_for
from harness.catalogue import result_id
from harness.cleanup import CleanupRegistry
from harness.commands import CommandLog, CompletedCommand
from harness.deadline import Deadline
from harness.devsy_handle import DevsyHandle
from harness.outcome import error_of
from harness.ownership import Ownership, RunPaths
from harness.probes import ProbeResult
from harness.providers import Provider
from harness.records import Figure

DIAGNOSTICS_BUDGET = 30.0


@dataclass(frozen=True)
class CaseSettings:
    """The session's options a case needs."""

    cli: tuple[str, ...]
    case_timeout: float
    cleanup_budget: float
    keep_on_failure: bool
    report_dir: Path


@dataclass
class CaseContext:
    case_id: str
    provider: Provider
    nodeid: str
    paths: RunPaths
    settings: CaseSettings
    deadline: Deadline = field(default_factory=lambda: Deadline(0))
    log: CommandLog = field(default_factory=CommandLog)
    figures: dict[str, Figure] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    diagnostics: Path | None = None
    # The backend's probe result for this run: a `needs_boot=False` case may run where it could not boot a guest.
    probe: ProbeResult | None = None

    def __post_init__(self) -> None:
        self.deadline = Deadline(self.settings.case_timeout)
        self.cleanup = CleanupRegistry(default_budget=self.settings.cleanup_budget, log=self.log)

    @property
    def result_id(self) -> str:
        return result_id(self.case_id, self.provider.name)

    @property
    def ownership(self) -> Ownership:
        return Ownership(self.paths.run_id)

    @cached_property
    def workdir(self) -> Path:
        """A fresh directory owned by this case (sources, scratch files)."""
        path = self.paths.case_dir(self.result_id)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def workspace_id(self, suffix: str = "") -> str:
        return self.ownership.workspace_id(self.case_id, self.provider.name, suffix)

    @cached_property
    def backend(self) -> BackendInspector:
        return inspector_for(self.provider.target, self.provider.environment())

    @cached_property
    def devsy(self) -> DevsyHandle:
        return DevsyHandle(
            cli=list(self.settings.cli),
            provider=self.provider,
            home=self.paths.devsy_home,
            ssh_config=self.paths.ssh_config,
            deadline=self.deadline,
            log=self.log,
            on_create=self.register_workspace_cleanup,
        )

    def register_workspace_cleanup(self, workspace_id: str) -> None:
        """Registered before `up` may create the workspace: the backend sweep first, so it runs last."""
        self.cleanup.add(f"remove {self.provider.backend} objects of {workspace_id}",
                         lambda: self.backend.remove_workspace(workspace_id))
        handle = self.devsy
        self.cleanup.add_command(
            f"devsy delete {workspace_id}",
            [*handle.cli, "delete", workspace_id, "--json"],
            env=handle.env(),
            not_found=_workspace_not_found,
        )

    def created_workspaces(self) -> list[str]:
        """Workspace ids this case ran `devsy up` for (without creating a handle if the case never used one)."""
        handle = self.__dict__.get("devsy")
        return list(handle.created) if isinstance(handle, DevsyHandle) else []

    def record_figure(self, name: str, value: Figure) -> None:
        self.figures[name] = value

    def keep_instances(self) -> list[str]:
        """Skip cleanup (--devsy-keep-on-failure) and return the commands that enter each kept workspace."""
        self.kept = [self.devsy.enter_command(ws) for ws in self.devsy.created]
        sweep = f"python -m harness sweep --run-id {shlex.quote(self.paths.run_id)}"
        self.cleanup.keep(f"--devsy-keep-on-failure; remove later with: {sweep}")
        return self.kept

    def diagnostics_handle(self) -> DevsyHandle:
        """A handle for collecting diagnostics after the body: its own small budget, its own command log."""
        return dataclasses.replace(self.devsy, deadline=Deadline(DIAGNOSTICS_BUDGET), log=CommandLog())


def _workspace_not_found(completed: CompletedCommand) -> bool:
    error = error_of(completed.stdout)  # classified by the outcome's error kind, never by text
    return error is not None and error.is_a(WorkspaceNotFound, NotFound)
