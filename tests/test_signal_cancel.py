"""A signal that cancels a command is acted on outside its handler: the handler runs in the main thread between two
bytecodes, possibly while that thread holds the cancel token's lock (a driver unregistering a callback). OpenSSH
hanging up `devsy ssh --stdio` at that moment once hung the proxy for good."""

from __future__ import annotations

import os
import signal

from devsy import termination
from devsy.cli.commands import cancellable
from devsy.driver.base import CancelToken


def test_a_signal_while_the_main_thread_holds_the_tokens_lock_cancels_once_it_is_released() -> None:
    token, before = CancelToken(), signal.getsignal(signal.SIGHUP)
    with termination.cancelling((signal.SIGHUP,), token.cancel) as received:
        with token._lock:  # what on_cancel's unsubscribe holds for a moment
            os.kill(os.getpid(), signal.SIGHUP)  # os.kill runs this process's handlers before it returns
            assert received == [signal.SIGHUP]
            assert not token.is_cancelled()  # the watcher waits for the lock: the handler did not take it
        assert token.wait(10)
    assert signal.getsignal(signal.SIGHUP) == before


def test_a_command_hung_up_while_unsubscribing_ends_as_hung_up() -> None:
    def run(cancel: CancelToken) -> int:
        unsubscribe = cancel.on_cancel(lambda: None)
        with cancel._lock:
            os.kill(os.getpid(), signal.SIGHUP)
        unsubscribe()
        assert cancel.wait(10)
        return 0

    assert cancellable(run) == 128 + signal.SIGHUP


def test_a_signal_inherited_as_ignored_stays_ignored() -> None:
    token = CancelToken()
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with termination.cancelling((signal.SIGHUP,), token.cancel) as received:
            os.kill(os.getpid(), signal.SIGHUP)
        assert received == [] and not token.is_cancelled()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
