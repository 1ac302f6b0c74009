"""Typed errors shared by every layer, and the one registry of error kinds.

Every error a user can see carries a message (what failed and why) and a hint (what to do next). The CLI prints
both and puts the error's `kind` in the `type` field of the `--json` outcome's error, so scripts never parse
messages. Every DevsyError subclass, wherever it is defined, declares its own `kind`; the class registers itself
here when it is created, and a missing or already-taken kind fails at import (a TypeError), not in a user's run.
Look a kind up with `error_class`; list them with `registered_kinds`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType

_REGISTRY: dict[str, type[DevsyError]] = {}


def _origin(cls: type) -> tuple[str, str]:
    """Where a class is defined: its qualified name in its source file (a module run as a script and imported
    again, or reloaded, defines the same class twice; that is not a second kind)."""
    module = sys.modules.get(cls.__module__)
    return cls.__qualname__, str(getattr(module, "__file__", None) or cls.__module__)


def _register(cls: type[DevsyError]) -> None:
    kind = cls.__dict__.get("kind")
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} declares no `kind`: every DevsyError subclass "
                        "declares its own stable kind string (it is the `--json` error type)")
    taken = _REGISTRY.get(kind)
    if taken is not None and _origin(taken) != _origin(cls):
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} declares kind {kind!r}, already declared by "
                        f"{taken.__module__}.{taken.__qualname__}: every error kind is unique")
    _REGISTRY[kind] = cls


def error_class(kind: str) -> type[DevsyError] | None:
    """The class that declares `kind`, among the classes defined so far in this process; None if none does."""
    return _REGISTRY.get(kind)


def registered_kinds() -> Mapping[str, type[DevsyError]]:
    """Every declared kind -> its class (read-only; only modules imported so far have registered theirs)."""
    return MappingProxyType(_REGISTRY)


class DevsyError(Exception):
    """Base of every error devsy reports to a user."""

    kind = "error"
    exit_code = 1

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        _register(cls)

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


_register(DevsyError)  # the base's kind is taken too: a subclass that means "some error" has its own


class UsageError(DevsyError):
    """The command line or an option value is invalid."""

    kind = "usage"
    exit_code = 2


class ConfigError(DevsyError):
    """devcontainer.json is missing, malformed or asks for something unsupported."""

    kind = "config"


class WorkspaceError(DevsyError):
    """A workspace record, id, source or lock problem."""

    kind = "workspace"


class WorkspaceNotFound(WorkspaceError):
    kind = "workspace-not-found"


class CorruptRecord(WorkspaceError):
    """workspace.json exists but cannot be read as a record (`devsy delete` still removes the workspace)."""

    kind = "workspace-corrupt"


class LockTimeout(WorkspaceError):
    kind = "lock-timeout"


class DriverError(DevsyError):
    """A backend operation failed."""

    kind = "driver"


class NotFound(DriverError):
    """The instance (or image, volume) does not exist in the backend."""

    kind = "not-found"


class AlreadyExists(DriverError):
    kind = "already-exists"


class BackendUnavailable(DriverError):
    """The backend cannot be reached at all (no daemon, no binary)."""

    kind = "backend-unavailable"


class ImageError(DriverError):
    """An image could not be found, pulled, built or loaded."""

    kind = "image"


class RecreateRequired(DriverError):
    """Reusing the instance would change its identity or mount policy; only `--recreate` may do that."""

    kind = "recreate-required"


class BootFailed(DriverError):
    """The instance was created but never became reachable (a microVM that did not boot: no KVM that can boot, a
    broken libkrunfw, ...). Declared here, not in a driver, because the Runtime Protocol restores it by kind too."""

    kind = "boot-failed"


class Cancelled(DevsyError):
    kind = "cancelled"
    exit_code = 130


class CommandFailed(DevsyError):
    """A lifecycle command (onCreateCommand, postStartCommand, ...) exited non-zero in the guest."""

    kind = "lifecycle-command"


class ReportedError(DevsyError):
    """An error another devsy process reported (devsy ssh's master): shown with that process's kind and exit code,
    so scripts see the same `type` either way."""

    kind = "reported"  # the class's own kind; every instance carries the kind it was reported with

    def __init__(self, kind: str, exit_code: int, message: str, hint: str = "") -> None:
        super().__init__(message, hint)
        self.kind = kind or DevsyError.kind
        self.exit_code = exit_code if isinstance(exit_code, int) and 0 < exit_code < 256 else DevsyError.exit_code

