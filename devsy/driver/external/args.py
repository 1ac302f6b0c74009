"""The arguments an `external:EXECUTABLE` provider is launched with: its ARGS option, split like a shell would.

The protocol has no subcommand convention (a go-plugin provider serves when started with the handshake environment,
usually with no arguments at all), so devsy passes exactly what the user declares and nothing else.
"""

from __future__ import annotations

import shlex

from devsy.driver.provider_table import ARGS_OPTION
from devsy.errors import UsageError


def declared_args(text: str) -> list[str]:
    """The ARGS option as an argv, split like a POSIX shell would (no expansion); the value is never echoed."""
    try:
        return shlex.split(text)
    except ValueError as exc:  # "No closing quotation" / "No escaped character": says what is wrong, not the value
        raise UsageError(f"--provider-option {ARGS_OPTION} cannot be split into arguments: {exc}",
                         hint="quote it like a shell command line, e.g. ARGS='--state-dir /x --mode normal'") from None
