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

A handler devsy installs does no work itself: it records the signal and writes a byte to a pipe (SignalWake). Python
runs a handler in the main thread between two of its bytecodes, so a handler that took a lock would wait for ever
whenever the main thread held that lock at the moment the signal came (a CancelToken's, while a driver unregisters a
callback: OpenSSH hanging up `devsy ssh --stdio` hung it that way). A poll loop or `cancelling`'s watcher thread acts.

For the same reason the pipe is also written by Python's C-level handler (signal.set_wakeup_fd), in whatever thread
took the signal: the kernel may hand a signal to any thread (one sent while the process is stopped goes to the first
thread to run when it continues, as `kill %N` does to a stopped job), and a main thread blocked in a read runs the
handler only once that read returns, which may be never.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from devsy.redaction import redact_text

Handler = Callable[[int, Any], None]

TERMINATING = (signal.SIGTERM, signal.SIGHUP)

log = logging.getLogger("devsy.termination")

# How long leaving `cancelling` waits for a cancel its watcher thread is still running (a kill of the command's tree).
_WATCHER_JOIN_S = 10.0


class Terminated(KeyboardInterrupt):
    """The process was told to end by `signum` (its exit status is then 128 + signum, the shell's convention)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def install(signums: Iterable[int], handler: Handler, *, keep_ignored: bool = True) -> dict[int, Any]:
    """Set `handler` for each of `signums` the process does not ignore (every one, with keep_ignored=False: for a
    process devsy itself starts and stops with these signals); the previous handlers, for restore(). One that cannot
    be set (SIGKILL, say) raises with the ones set before it put back."""
    previous = {}
    try:
        for signum in signums:
            if not keep_ignored or signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, handler)
    except BaseException:
        restore(previous)
        raise
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


class SignalWake:
    """Signals recorded (`received`, in order) and announced on a pipe (`wake_r`), the only work `handler` does."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)  # a handler must never block: a full pipe already says "wake up"

    def handler(self, signum: int, _frame: object) -> None:
        self.received.append(signum)
        self.wake()

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"!")

    def wait(self, timeout: float) -> bool:
        """Whether a signal has been received, waiting up to `timeout` seconds for one (main thread: its handler
        runs there). A wake no signal of ours explains (another handler's byte, written through set_wakeup_fd) is
        read away, so the next wait waits. Whenever this returns False, a signal recorded meanwhile still has its
        handler's own wake in the pipe (written after recording), for the caller's poll loop."""
        waiter = select.poll()
        waiter.register(self.wake_r, select.POLLIN)
        if not self.received and waiter.poll(timeout * 1000) and not self.received:
            os.read(self.wake_r, 64)
        return bool(self.received)

    @contextlib.contextmanager
    def from_any_thread(self) -> Iterator[None]:
        """While the block runs, every signal with a Python handler also writes its number to `wake_r` at once, from
        the thread that took it (set_wakeup_fd; main thread only, like signal.signal)."""
        if threading.current_thread() is not threading.main_thread():
            yield  # no handler can be installed here either (signal.signal): nothing to be woken by
            return
        previous = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        try:
            yield
        finally:
            signal.set_wakeup_fd(previous)

    def close_writer(self) -> None:
        """No more wakes: a reader of `wake_r` sees end of file once it has read what was written."""
        if self._wake_w >= 0:
            os.close(self._wake_w)
            self._wake_w = -1

    def close(self) -> None:
        self.close_writer()
        os.close(self.wake_r)


@contextlib.contextmanager
def cancelling(signums: Iterable[int], cancel: Callable[[], None], *,
               keep_ignored: bool = True) -> Iterator[list[int]]:
    """While the block runs, each of `signums` (see install() for ignored ones) makes a watcher thread call `cancel`;
    yields the list of signals received. `cancel` may take locks and run callbacks: it never runs in the handler.

    The watcher acts on the number the C-level handler writes (SignalWake.from_any_thread), not on the Python
    handler, which only records the signal: the main thread may not run that handler before the command is over."""
    signums = frozenset(signums)
    wake = SignalWake()
    watcher = threading.Thread(target=_cancel_on_wake, args=(wake.wake_r, signums, cancel), name="signal-watcher",
                               daemon=True)
    watcher.start()
    try:
        # The wake pipe first: a signal coming as soon as its handler is in place must find the watcher listening.
        with wake.from_any_thread():
            previous = install(signums, lambda signum, _frame: wake.received.append(signum),
                               keep_ignored=keep_ignored)
            try:
                yield wake.received
            finally:
                restore(previous)
    finally:
        wake.close_writer()  # the watcher reads end of file once it has acted on every signal written before
        watcher.join(_WATCHER_JOIN_S)
        if not watcher.is_alive():  # else still cancelling: its descriptor stays open until the process exits
            os.close(wake.wake_r)


def _cancel_on_wake(wake_r: int, signums: frozenset[int], cancel: Callable[[], None]) -> None:
    while data := os.read(wake_r, 64):
        if signums.isdisjoint(data):
            continue  # another handler's signal (a terminal's SIGWINCH, say): set_wakeup_fd writes every one
        try:
            cancel()
        except Exception as exc:  # noqa: BLE001 - a failed callback must not leave later signals unheard
            log.error("cancelling on a signal failed: %s: %s", type(exc).__name__, redact_text(str(exc)))
