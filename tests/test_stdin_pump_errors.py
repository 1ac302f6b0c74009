"""What StdinPump does when reading its input or delivering it fails (devsy/stdin_pump.py): an input that cannot be
read ends the input, a read that would block waits for the next poll(), and only a failed delivery is an error."""

from __future__ import annotations

import errno
import os
import threading

from devsy import stdin_pump
from devsy.stdin_pump import StdinPump

JOIN_S = 10


def _run(source, sink=None) -> tuple[StdinPump, list[bytes], threading.Event]:
    got: list[bytes] = []
    eof = threading.Event()
    pump = StdinPump(source, sink or got.append, eof.set)
    pump.start()
    pump.join(JOIN_S)
    assert not pump.is_alive()
    return pump, got, eof


def test_an_input_open_for_writing_only_ends_the_input(tmp_path) -> None:
    with open(tmp_path / "stdin", "ab") as write_only:  # what `nohup` or `0>>file` leaves on descriptor 0
        pump, got, eof = _run(write_only)
    assert eof.is_set() and got == []
    assert pump.error is None
    assert isinstance(pump.input_error, OSError) and pump.input_error.errno == errno.EBADF


def test_a_read_that_would_block_waits_for_the_input(monkeypatch) -> None:
    """poll() said the input is readable, another reader of a non-blocking descriptor took it first: EAGAIN."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    real_read, raised = os.read, []

    def read_taken_by_another(fd: int, size: int) -> bytes:
        if fd == read_end and not raised:
            raised.append(fd)
            real_read(fd, size)  # the other reader empties it; more input comes, then its end
            os.write(write_end, b"later")
            os.close(write_end)
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        return real_read(fd, size)

    monkeypatch.setattr(stdin_pump.os, "read", read_taken_by_another)
    os.write(write_end, b"taken")
    with open(read_end, "rb", buffering=0) as source:
        pump, got, eof = _run(source)
    assert raised and got == [b"later"] and eof.is_set()
    assert pump.error is None and pump.input_error is None


def test_a_failed_delivery_is_the_error_and_no_end_of_input_is_lost(tmp_path) -> None:
    (tmp_path / "input").write_bytes(b"data")

    def sink(_data: bytes) -> None:
        raise OSError(errno.EIO, "the transport failed")

    with open(tmp_path / "input", "rb") as source:
        pump, _, _ = _run(source, sink)
    assert isinstance(pump.error, OSError) and pump.error.errno == errno.EIO
    assert pump.input_error is None


def test_a_source_closed_under_the_pump_ends_the_input(tmp_path) -> None:
    source = open(tmp_path / "input", "wb+")  # noqa: SIM115 - closed before the pump reads it
    source.close()
    pump, got, eof = _run(source)
    assert eof.is_set() and got == [] and pump.error is None
    assert isinstance(pump.input_error, ValueError)
