"""Typed errors of the MicroSandbox driver (all are DriverErrors, so every caller can treat them as backend faults)."""

from __future__ import annotations

from devsy.errors import BootFailed, DriverError

__all__ = ["BootFailed", "MsbCommandError", "MsbTimeout"]  # BootFailed lives in devsy.errors: the wire layer needs it


class MsbCommandError(DriverError):
    """An `msb` command failed for a reason devsy has no more specific type for; carries msb's stderr tail."""

    kind = "msb-command"

    def __init__(self, message: str, hint: str = "", *, returncode: int | None = None, stderr_tail: str = "") -> None:
        super().__init__(message, hint)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class MsbTimeout(DriverError):
    """An `msb` command did not finish within its budget; its process group was stopped."""

    kind = "timeout"
