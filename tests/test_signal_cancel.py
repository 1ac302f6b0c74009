"""A signal that cancels a command is acted on outside its handler: the handler runs in the main thread between two
bytecodes, possibly while that thread holds the cancel token's lock (a driver unregistering a callback). OpenSSH
hanging up `devsy ssh --stdio` at that moment once hung the proxy for good."""

from __future__ import annotations

import os
import select
import signal
import threading

import pytest

from devsy import termination
from devsy.cli.commands import cancellable
from devsy.driver.base import CancelToken


@pytest.fixture(autouse=True)
def sighup_default():
    """SIGHUP as a terminal's process has it: a runner started under nohup hands it down ignored, and an ignored
    signal stays ignored (the last test)."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGHUP, previous)


def test_a_signal_while_the_main_thread_holds_the_tokens_lock_cancels_once_it_is_released() -> None:
    token, before = CancelToken(), signal.getsignal(signal.SIGHUP)
    with termination.cancelling((signal.SIGHUP,), token.cancel) as received:
        with token._lock:  # what on_cancel's unsubscribe holds for a moment
            os.kill(os.getpid(), signal.SIGHUP)  # os.kill runs this process's handlers before it returns
            assert received == [signal.SIGHUP]
            assert not token.is_cancelled()  # the watcher waits for the lock: the handler did not take it
        assert token.wait(10)
    assert signal.getsignal(signal.SIGHUP) == before


def test_a_signal_another_thread_takes_is_written_to_the_wake_pipe_by_that_thread() -> None:
    """The kernel may hand a signal to any thread (one sent to a stopped process goes to the first thread to run
    when it continues: `kill %N` on a stopped job). Its Python handler then waits for the main thread, which may be
    blocked until the command ends; the C-level handler writes the signal's number at once, in the thread that took
    it, and the watcher acts on that."""
    wake = termination.SignalWake()
    try:
        with termination.handling((signal.SIGHUP,), lambda *_: None), wake.from_any_thread():
            bystander = threading.Thread(target=lambda: signal.pthread_kill(threading.get_ident(), signal.SIGHUP))
            bystander.start()
            bystander.join()
            os.set_blocking(wake.wake_r, False)
            assert os.read(wake.wake_r, 64) == bytes([signal.SIGHUP])
    finally:
        wake.close()


def test_a_signal_as_soon_as_the_handler_is_in_place_cancels(monkeypatch) -> None:
    """The watcher listens before any handler is installed: a signal right after install() is not only recorded."""
    def install_then_signal(*args, **kwargs):
        previous = install(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGHUP)  # its handler runs before os.kill returns
        return previous

    install = termination.install
    monkeypatch.setattr(termination, "install", install_then_signal)
    token = CancelToken()
    with termination.cancelling((signal.SIGHUP,), token.cancel) as received:
        assert received == [signal.SIGHUP]
        assert token.wait(10)


def test_a_signal_that_cannot_be_handled_leaves_the_handlers_as_they_were() -> None:
    before = signal.getsignal(signal.SIGHUP)
    with pytest.raises(OSError):
        with termination.cancelling((signal.SIGHUP, signal.SIGKILL), lambda: None):
            pass
    assert signal.getsignal(signal.SIGHUP) == before


@pytest.mark.parametrize(("written", "cancels"), [(bytes([signal.SIGWINCH]), 0),
                                                 (bytes([signal.SIGWINCH, signal.SIGHUP]), 1)],
                         ids=["SIGWINCH", "SIGWINCH-then-SIGHUP"])
def test_only_the_signals_given_cancel(written: bytes, cancels: int) -> None:
    """Every signal with a Python handler writes its number to the watcher's pipe (a terminal's SIGWINCH, say): only
    the ones `cancelling` was given cancel."""
    calls: list[None] = []
    wake_r, wake_w = os.pipe()
    os.write(wake_w, written)
    os.close(wake_w)
    termination._cancel_on_wake(wake_r, frozenset({signal.SIGHUP}), lambda: calls.append(None))
    os.close(wake_r)
    assert len(calls) == cancels


def test_a_command_hung_up_while_unsubscribing_ends_as_hung_up() -> None:
    def run(cancel: CancelToken) -> int:
        unsubscribe = cancel.on_cancel(lambda: None)
        with cancel._lock:
            os.kill(os.getpid(), signal.SIGHUP)
        unsubscribe()
        assert cancel.wait(10)
        return 0

    assert cancellable(run) == 128 + signal.SIGHUP


def test_a_failed_cancel_leaves_later_signals_heard(caplog) -> None:
    calls: list[threading.Event] = [threading.Event(), threading.Event()]

    def cancel() -> None:
        first = not calls[0].is_set()
        calls[0 if first else 1].set()
        if first:
            raise OSError("the first cancel failed")

    with termination.cancelling((signal.SIGHUP,), cancel) as received:
        os.kill(os.getpid(), signal.SIGHUP)
        assert calls[0].wait(10)  # the first cancel ran (and failed) before the second signal
        os.kill(os.getpid(), signal.SIGHUP)
        assert calls[1].wait(10)
    assert received == [signal.SIGHUP, signal.SIGHUP]
    assert "cancelling on a signal failed: OSError: the first cancel failed" in caplog.text


def test_a_signal_inherited_as_ignored_stays_ignored() -> None:
    token = CancelToken()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with termination.cancelling((signal.SIGHUP,), token.cancel) as received:
        os.kill(os.getpid(), signal.SIGHUP)
    assert received == [] and not token.is_cancelled()
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


@pytest.fixture
def wake():
    """A SignalWake handling SIGHUP, as the SSH master's client has one for SIGINT, SIGTERM and SIGHUP."""
    wake = termination.SignalWake()
    try:
        with termination.handling((signal.SIGHUP,), wake.handler), wake.from_any_thread():
            yield wake
    finally:
        wake.close()


def _readable(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def test_wait_says_a_signal_another_thread_took_was_received(wake) -> None:
    """The wait a stopped `devsy ssh &` does for the foreground: the signal of a `kill %N` may go to any thread. (The
    main thread runs the handler as soon as join() returns, before wait() polls: this checks the answer, not the
    poll; test_wait_reads_away_a_wake_no_signal_explains checks that the poll reads.)"""
    bystander = threading.Thread(target=lambda: signal.pthread_kill(threading.get_ident(), signal.SIGHUP))
    bystander.start()
    bystander.join()
    assert wake.wait(30)
    assert wake.received == [signal.SIGHUP]


def test_wait_leaves_a_received_signals_wake_for_the_poll_loop(wake) -> None:
    os.kill(os.getpid(), signal.SIGHUP)  # its handler runs before os.kill returns
    assert wake.wait(0)
    assert _readable(wake.wake_r)  # the session's poll loop, next, still wakes for it


def test_wait_reads_away_a_wake_no_signal_explains(wake) -> None:
    wake.wake()  # as another handler's byte (a SIGWINCH's, through set_wakeup_fd) would
    assert not wake.wait(0)
    assert not _readable(wake.wake_r)  # the next wait waits instead of returning at once, again and again
