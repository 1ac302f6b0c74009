"""Typed errors shared by every layer.

Every error a user can see carries a message (what failed and why) and a hint (what to do next). The CLI prints
both and maps the error type to a stable `type` field in the `--json` outcome, so scripts never parse messages.
"""

from __future__ import annotations


class DevsyError(Exception):
    """Base of every error devsy reports to a user."""

    kind = "error"
    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


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


class Cancelled(DevsyError):
    kind = "cancelled"
    exit_code = 130


class CommandFailed(DevsyError):
    """A lifecycle command (onCreateCommand, postStartCommand, ...) exited non-zero in the guest."""

    kind = "lifecycle-command"


class ReportedError(DevsyError):
    """An error another devsy process reported (devsy ssh's master): shown with that process's kind and exit code,
    so scripts see the same `type` either way."""

    def __init__(self, kind: str, exit_code: int, message: str, hint: str = "") -> None:
        super().__init__(message, hint)
        self.kind = kind or DevsyError.kind
        self.exit_code = exit_code if isinstance(exit_code, int) and 0 < exit_code < 256 else DevsyError.exit_code
