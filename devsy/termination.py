"""SIGTERM and SIGHUP turned into an exception, so a devsy process they end unwinds as it does on Ctrl-C; and the
rule devsy's commands follow when they handle SIGINT, SIGTERM or SIGHUP: a signal inherited as ignored stays ignored.
(Processes devsy starts itself and stops with SIGTERM, such as the SSH master, a provider or the background hooks,
take their stop signal whatever they inherited.)

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


def install(signums: Iterable[int], handler: Handler, *, keep_ignored: bool = True) -> dict[int, Any]:
    """Set `handler` for each of `signums` the process does not ignore (every one, with keep_ignored=False: for a
    process devsy itself starts and stops with these signals); the previous handlers, for restore()."""
    previous = {}
    for signum in signums:
        if not keep_ignored or signal.getsignal(signum) is not signal.SIG_IGN:
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


def raise_on_termination(*, keep_ignored: bool = True) -> None:
    """From now on, SIGTERM and SIGHUP (unless ignored, see install()) raise Terminated in the main thread."""
    install(TERMINATING, _raise_terminated, keep_ignored=keep_ignored)
