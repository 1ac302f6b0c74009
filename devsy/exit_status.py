"""What devsy exits with for a command's result: a shell's convention, whatever form the provider reported it in."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for the annotation: the SSH client imports this module and not the driver layer
    from devsy.driver.base import ExecResult

_UNKNOWN_SIGNAL_EXIT = 255


def signal_number(name: str) -> int | None:
    """15 for `SIGTERM` or `TERM` (devsy's providers send the first, Go-built ones may send the second)."""
    upper = name.upper()
    member = signal.Signals.__members__.get(upper if upper.startswith("SIG") else f"SIG{upper}")
    return int(member) if member is not None else None


def shell_status(result: ExecResult) -> int:
    """128+N for a command killed by signal N, even when the provider sent exit_code 0 alongside the name (the
    protocol allows it: a nonempty signal is a failure regardless of exit_code); else the exit code."""
    if not result.signal:
        return result.exit_code
    number = signal_number(result.signal)
    if number is not None:
        return 128 + number
    return result.exit_code or _UNKNOWN_SIGNAL_EXIT
