"""Unit regressions: a copy loop blocked on stdin ends at once on cancel; owned streams are closed exactly once,
caller-owned descriptors never."""

from __future__ import annotations

import io
import os
import threading

import pytest

from devsy.stdin_pump import StdinPump
from devsy.ssh.tunnel import GatedInput


class BlockingSource(io.RawIOBase):
    """A stream without a descriptor whose read blocks until it is closed (like a pipe nobody writes)."""

    def __init__(self) -> None:
        super().__init__()
        self._released = threading.Event()
        self.reading = threading.Event()
        self.close_calls = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self.reading.set()
        self._released.wait()
        return 0

    def close(self) -> None:
        if not self.closed:
            self.close_calls += 1
            self._released.set()
        super().close()


def test_owned_blocked_stdin_is_closed_on_cancel_and_the_loop_ends():
    source = BlockingSource()
    received: list[bytes] = []
    pump = StdinPump(source, received.append, on_eof=lambda: None, owns_source=True)
    pump.start()
    assert source.reading.wait(5)
    pump.stop()
    pump.join(5)
    assert not pump.is_alive(), "a copy loop blocked on owned stdin must end when cancelled"
    assert source.close_calls == 1
    pump.stop()  # a second cancel changes nothing
    assert source.close_calls == 1


def test_caller_owned_descriptor_is_never_closed_and_the_loop_still_ends():
    read_fd, write_fd = os.pipe()
    caller_stdin = os.fdopen(read_fd, "rb", buffering=0)
    try:
        pump = StdinPump(caller_stdin, lambda data: None, on_eof=lambda: None)
        pump.start()
        pump.stop()
        pump.join(5)
        assert not pump.is_alive()
        assert not caller_stdin.closed
        os.fstat(read_fd)  # still open
    finally:
        caller_stdin.close()
        os.close(write_fd)


def test_pump_copies_until_end_of_file_then_signals_it():
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"abc" * 1000)
    os.close(write_fd)
    received: list[bytes] = []
    eof = threading.Event()
    with os.fdopen(read_fd, "rb", buffering=0) as stdin:
        pump = StdinPump(stdin, received.append, on_eof=eof.set)
        pump.start()
        pump.join(5)
    assert eof.is_set() and b"".join(received) == b"abc" * 1000


def test_gated_input_reads_nothing_before_the_gate_and_close_wakes_it():
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"client banner")
    gated = GatedInput(read_fd)
    results: list[bytes] = []
    reader = threading.Thread(target=lambda: results.append(gated.read(64)))
    reader.start()
    reader.join(0.3)
    assert reader.is_alive() and results == [], "nothing may be consumed before the agent has spoken"
    gated.close()
    reader.join(5)
    assert results == [b""]
    gated.dispose()
    assert os.read(read_fd, 64) == b"client banner"  # still there for the next attempt; fd not closed
    os.close(read_fd)
    os.close(write_fd)


def test_gated_input_passes_bytes_once_open():
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"data")
    gated = GatedInput(read_fd)
    gated.open_gate()
    assert gated.read(64) == b"data"
    gated.dispose()
    os.close(read_fd)
    os.close(write_fd)


def test_dispose_does_not_wait_for_ever_on_a_read_another_reader_starved():
    """poll() said readable, but another reader of the shared descriptor (a terminal, a pipe) took the bytes: the
    read blocks where close() cannot wake it. dispose() returns after its bound; the owned descriptor is closed by
    the reader once its read returns, never under it (its number cannot be reused while the read may still use it)."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"x")  # what makes poll() say readable
    blocked, release = threading.Event(), threading.Event()

    def starved_read(size: int) -> bytes:
        blocked.set()
        release.wait(30)  # stands for os.read on a descriptor another reader just drained
        return os.read(read_fd, size)

    gated = GatedInput(read_fd, read=starved_read, owns_fd=True)
    gated.open_gate()
    results: list[bytes] = []
    reader = threading.Thread(target=lambda: results.append(gated.read1(64)))
    reader.start()
    assert blocked.wait(5)
    disposer = threading.Thread(target=gated.dispose, kwargs={"wait": 0.2})
    disposer.start()
    disposer.join(10)
    assert not disposer.is_alive(), "dispose waited for a read nothing can wake"
    os.fstat(read_fd)  # still open: the reader is inside its read
    release.set()
    reader.join(10)
    assert results == [b"x"]
    with pytest.raises(OSError):  # the reader closed the descriptor it was left to close
        os.fstat(read_fd)
    os.close(write_fd)


def test_an_owned_descriptor_is_closed_by_dispose():
    read_fd, write_fd = os.pipe()
    gated = GatedInput(read_fd, owns_fd=True)
    gated.dispose()
    with pytest.raises(OSError):  # an owned descriptor does not outlive dispose()
        os.fstat(read_fd)
    os.close(write_fd)
