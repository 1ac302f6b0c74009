"""SIGTERM and SIGHUP turned into an exception, so a devsy process they end unwinds as it does on Ctrl-C; and the
one rule every devsy handler of these signals follows: a signal the process inherited as ignored stays ignored.

A service manager's stop, a `kill`, a closed terminal: each would otherwise end the process at once, leaving the
guest command it ran still running and what it had half-created in place. Raised like KeyboardInterrupt, they go
through the same `finally`/`except BaseException` paths Ctrl-C does (a hook's cancel token, an up's rollback).

`nohup devsy exec ...` (SIGHUP ignored) asked to outlive its terminal, and a script's background job (SIGINT ignored)
to be out of reach of the terminal's Ctrl-C: Python itself leaves an inherited SIG_IGN of SIGINT alone, and so does
devsy for each signal it handles.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import Any

Handler = Callable[[int, Any], None]

TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The process was told to end by `signum` (its exit status is then 128 + signum, the shell's convention)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def install(signums: Iterable[int], handler: Handler) -> dict[int, Any]:
    """Set `handler` for each of `signums` the process does not ignore; the previous handlers, for restore()."""
    previous = {}
    for signum in signums:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, handler)
    return previous


def restore(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@contextlib.contextmanager
def handling(signums: Iterable[int], handler: Handler) -> Iterator[None]:
    """`handler` for `signums` (those not ignored) while the block runs; the previous handlers after it."""
    previous = install(signums, handler)
    try:
        yield
    finally:
        restore(previous)


def raise_on_termination() -> None:
    """From now on, SIGTERM and SIGHUP (unless ignored) raise Terminated in the main thread."""
    install(TERMINATING, _raise_terminated)
