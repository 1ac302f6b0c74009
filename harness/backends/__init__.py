"""The harness's own view of each backend (not devsy's driver): find, inspect and remove objects by label."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, Protocol

LABEL_MANAGED = "dev.devsy.managed"
LABEL_WORKSPACE = "dev.devsy.workspace"


class BackendUnavailable(RuntimeError):
    """The backend cannot be reached to inspect or sweep it."""


@dataclass(frozen=True)
class BackendInstance:
    id: str
    name: str
    created_at: str
    status: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.status == "running"


@dataclass
class SweepOutcome:
    removed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BackendExec:
    """A command run in an instance by the backend itself (docker exec, msb exec), as its default user."""

    exit_code: int
    stdout: str
    stderr: str


# Decides from an object's labels whether a sweep owns it.
LabelMatch = Callable[[dict[str, str]], bool]


class BackendInspector(Protocol):
    backend: str

    def instances(self, workspace_id: str) -> list[BackendInstance]: ...

    def volumes(self, workspace_id: str) -> list[str]: ...

    def instance_logs(self, workspace_id: str, lines: int = 200) -> str: ...

    def exec(self, workspace_id: str, argv: list[str]) -> BackendExec: ...

    def remove_workspace(self, workspace_id: str) -> list[str]: ...

    def sweep(self, owned: LabelMatch, keep: LabelMatch) -> SweepOutcome: ...


# backend -> the module:class of its inspector, imported on first use (the docker SDK only when Docker is inspected).
INSPECTORS: dict[str, str] = {
    "docker": "harness.backends.docker:DockerInspector",
    "microsandbox": "harness.backends.microsandbox:MicrosandboxInspector",
    # A simulated column's stand-in (harness/providers.py SIMULATORS): built with the column's environment only.
    "microsandbox-sim": "harness.backends.microsandbox:SimulatedMicrosandboxInspector",
}
# Inspected only with a column's environment (its stand-in and state): the sweeper visits them per run directory.
NEEDS_ENV = ("microsandbox-sim",)


def inspector_for(backend: str, env: Mapping[str, str] | None = None) -> BackendInspector:
    """The inspector of a backend (a provider's `target`), with the column's environment when it has one."""
    where = INSPECTORS.get(backend)
    if where is None:
        raise BackendUnavailable(f"the harness has no inspector for backend {backend!r} yet (harness/backends/)")
    module, _, cls = where.partition(":")
    factory = getattr(importlib.import_module(module), cls)
    inspector: BackendInspector = factory(env) if env or backend in NEEDS_ENV else factory()
    return inspector


def inspectable_backends() -> tuple[str, ...]:
    """Backends the sweeper visits in this process's environment."""
    return tuple(name for name in INSPECTORS if name not in NEEDS_ENV)
