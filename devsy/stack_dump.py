"""`kill -USR2 PID` on a devsy command writes every thread's Python stack to its stderr, and the command goes on.

For a command that hangs where it should not: the harness asks the devsy processes of a command past its deadline
for their stacks before it kills them, so a rare hang in CI leaves its evidence in the case's diagnostics. The dump is
file names, line numbers and function names only (no values), so no secret can be in it.
"""

from __future__ import annotations

import faulthandler
import signal

STACK_DUMP_SIGNAL = signal.SIGUSR2


def dump_stacks_on_signal() -> None:
    faulthandler.register(STACK_DUMP_SIGNAL, all_threads=True)
