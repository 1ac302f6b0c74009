"""SIGTERM and SIGHUP turned into an exception, so a devsy process they end unwinds as it does on Ctrl-C.

A service manager's stop, a `kill`, a closed terminal: each would otherwise end the process at once, leaving the
guest command it ran still running and what it had half-created in place. Raised like KeyboardInterrupt, they go
through the same `finally`/`except BaseException` paths Ctrl-C does (a hook's cancel token, an up's rollback).
"""

from __future__ import annotations

import signal

TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The process was told to end by `signum` (its exit status is then 128 + signum, the shell's convention)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def raise_on_termination() -> None:
    """From now on, SIGTERM and SIGHUP raise Terminated in the main thread."""
    for signum in TERMINATING:
        signal.signal(signum, _raise_terminated)
