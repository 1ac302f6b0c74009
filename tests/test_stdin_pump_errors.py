"""What StdinPump does when reading its input or delivering it fails (devsy/stdin_pump.py): an input that cannot be
read ends the input, a read that would block waits for the next poll() (the pump's, or a GatedInput's own), and only
a failed delivery is an error."""

from __future__ import annotations

import errno
import io
import os
import threading

from devsy.ssh.tunnel import GatedInput
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


def _taken_once_then(read_end: int, write_end: int, raised: list[int]):
    """A read of `read_end` that loses the race once: another reader of the non-blocking descriptor takes what poll()
    announced (EAGAIN), then more input comes, then its end."""
    def read(size: int) -> bytes:
        if not raised:
            raised.append(read_end)
            os.read(read_end, size)  # the other reader empties it
            os.write(write_end, b"later")
            os.close(write_end)
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        return os.read(read_end, size)
    return read


def test_a_read_that_would_block_waits_for_the_input(monkeypatch) -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    raised: list[int] = []
    read = _taken_once_then(read_end, write_end, raised)
    monkeypatch.setattr(StdinPump, "_read", lambda _self, fd: read(1 << 20) if fd == read_end else b"")
    os.write(write_end, b"taken")
    with open(read_end, "rb", buffering=0) as source:
        pump, got, eof = _run(source)
    assert raised and got == [b"later"] and eof.is_set()
    assert pump.error is None and pump.input_error is None


def test_a_gated_input_whose_read_would_block_waits_for_the_input() -> None:
    """The SSH master hands a client's stdin to the driver as a GatedInput (no descriptor: it polls itself); losing
    the race there must not end, nor fail, the input either."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    raised: list[int] = []
    gated = GatedInput(read_end, _taken_once_then(read_end, write_end, raised))
    gated.open_gate()
    os.write(write_end, b"taken")
    try:
        pump, got, eof = _run(gated)
    finally:
        gated.dispose()
        os.close(read_end)
    assert raised and got == [b"later"] and eof.is_set()
    assert pump.error is None and pump.input_error is None


class _WouldBlock(io.RawIOBase):
    """A source without a descriptor that can only say "not now": nothing can wait for it."""

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")


def test_a_source_without_a_descriptor_that_would_block_ends_the_input() -> None:
    pump, got, eof = _run(_WouldBlock())
    assert eof.is_set() and got == [] and pump.error is None
    assert isinstance(pump.input_error, BlockingIOError)


def test_a_failed_delivery_is_the_error_and_no_end_of_input_is_lost(tmp_path) -> None:
    (tmp_path / "input").write_bytes(b"data")

    def sink(_data: bytes) -> None:
        raise OSError(errno.EIO, "the transport failed")

    with open(tmp_path / "input", "rb") as source:
        pump, _, eof = _run(source, sink)
    assert isinstance(pump.error, OSError) and pump.error.errno == errno.EIO
    assert pump.input_error is None
    assert eof.is_set()  # the command is still told its input ended


def test_a_source_closed_under_the_pump_ends_the_input(tmp_path) -> None:
    source = open(tmp_path / "input", "wb+")  # noqa: SIM115 - closed before the pump reads it
    source.close()
    pump, got, eof = _run(source)
    assert eof.is_set() and got == [] and pump.error is None
    assert isinstance(pump.input_error, ValueError)
