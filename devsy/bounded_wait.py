"""Polling an outside state under a deadline: one helper, so every such wait is bounded and says what it waited for.

For a state no event tells us about (an engine's exec state, a process seen from another namespace, output a
backend copies asynchronously). Where an event exists (a pidfd, a pipe, a condition variable) wait on that instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from devsy import errors

T = TypeVar("T")
_SHOWN = 2000  # characters of the last value a timeout message quotes


class WaitTimeout(errors.DevsyError):
    """A bounded wait ended before what it waited for happened."""

    kind = "wait-timeout"

    def __init__(self, what: str, timeout: float, last: object = None, hint: str = "") -> None:
        shown = repr(last)
        detail = f"; last seen: {shown[:_SHOWN] + '...' if len(shown) > _SHOWN else shown}" if last is not None else ""
        super().__init__(f"{what} did not happen within {timeout:g}s{detail}",
                         hint=hint or "retry; if it keeps happening, the machine may be overloaded")
        self.what = what
        self.timeout = timeout
        self.last = last


def poll_until(probe: Callable[[], T], done: Callable[[T], bool], *, timeout: float, interval: float,
               what: str, hint: str = "") -> T:
    """Call `probe` every `interval` seconds until `done(value)`; returns that value. Raises WaitTimeout (carrying
    the last value) once `timeout` passes without it. `probe` always runs at least once, and once more at the end."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()  # never set: its wait is the pause between probes
    while True:
        value = probe()
        if done(value):
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(what, timeout, value, hint)
        pause.wait(min(interval, remaining))


def wait_until(predicate: Callable[[], bool], *, timeout: float, interval: float, what: str,
               hint: str = "") -> None:
    """Return once `predicate()` is true (checked every `interval` seconds); WaitTimeout after `timeout`."""
    poll_until(predicate, bool, timeout=timeout, interval=interval, what=what, hint=hint)
