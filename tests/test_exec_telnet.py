"""The host's half of a busybox telnetd terminal (devsy/ssh/exec_telnet.py) and the stdin features it uses
(devsy/ssh/tunnel.py GatedInput): encoding, decoding across chunk boundaries, and the login program's markers. The
same code against the real telnetd in a busybox guest is in test_exec_sessions.py and test_ssh_interactive.py."""

from __future__ import annotations

import io
import os
import threading

import pytest

from devsy.ssh.exec_telnet import TelnetOutput, _Decoder, escape_input, naws
from devsy.ssh.tunnel import GatedInput

NONCE = "0123456789abcdef"
READY = f"\x1b]devsy;{NONCE};ready\x07".encode()
# What busybox 1.35's telnetd sends first: DO ECHO, DO NAWS, WILL ECHO, WILL SGA; then its banner.
NEGOTIATION = b"\xff\xfd\x01\xff\xfd\x1f\xff\xfb\x01\xff\xfb\x03\r\r\n"


def exit_marker(status: int) -> bytes:
    return f"\x1b]devsy;{NONCE};exit={status}\x07".encode()


class Recorder:
    def __init__(self) -> None:
        self.sink, self.ready, self.ended = io.BytesIO(), 0, 0

    def output(self) -> TelnetOutput:
        return TelnetOutput(self.sink, NONCE, on_ready=self._ready, on_exit=self._exit)

    def _ready(self) -> None:
        self.ready += 1

    def _exit(self) -> None:
        self.ended += 1


def feed(stream: bytes, size: int) -> tuple[Recorder, TelnetOutput]:
    recorder = Recorder()
    output = recorder.output()
    for start in range(0, len(stream), size):
        assert output.write(stream[start:start + size]) == len(stream[start:start + size])
    return recorder, output


PAYLOAD = bytes(range(256)) + b"\x1b]0;a title\x07 \x1b]devsy;other;exit=3\x07 \x1b]devsy;" + NONCE.encode() + b" tail"


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 100_000])
def test_output_between_the_markers_arrives_exactly_in_any_chunking(size):
    # As telnetd sends it: negotiation, banner, ready, then the pty's bytes with IAC doubled, a subnegotiation and a
    # two-byte command among them (neither is data), the exit marker, and what a background job wrote after it.
    wire = (NEGOTIATION + READY + PAYLOAD[:40].replace(b"\xff", b"\xff\xff") + b"\xff\xfa\x18\x01\xff\xf0"
            + b"\xff\xf1" + PAYLOAD[40:].replace(b"\xff", b"\xff\xff") + exit_marker(42) + b"after the end")
    recorder, output = feed(wire, size)
    assert recorder.sink.getvalue() == PAYLOAD
    assert (recorder.ready, recorder.ended, output.status) == (1, 1, 42)


def test_nothing_passes_before_ready_and_no_status_without_the_marker():
    recorder, output = feed(NEGOTIATION + b"banner text", 3)
    assert (recorder.sink.getvalue(), recorder.ready, output.status) == (b"", 0, None)
    output.write(READY + b"partial \x1b]devsy;" + NONCE.encode() + b";exit=1")
    # The start of a possible marker is held, the rest is passed on.
    assert recorder.sink.getvalue() == b"partial "
    assert (recorder.ready, recorder.ended, output.status) == (1, 0, None)
    output.write(b"2\x07")
    assert (recorder.ended, output.status) == (1, 12)


def test_a_held_escape_that_is_no_marker_is_passed_on():
    recorder = Recorder()
    output = recorder.output()
    output.write(READY + b"\x1b]devs")
    assert recorder.sink.getvalue() == b""  # it may be the exit marker's start
    output.write(b"x")
    assert recorder.sink.getvalue() == b"\x1b]devsx" and output.status is None


def test_decoder_keeps_state_across_chunks():
    decoder = _Decoder()
    chunks = [b"a\xff", b"\xff", b"b\xff", b"\xfd", b"\x01c\xff\xfa", b"\x1f\x00\xff\xff", b"\xff", b"\xf0d"]
    # IAC IAC split, DO ECHO split, and a subnegotiation that contains IAC IAC and ends in the next chunk.
    assert b"".join(decoder.decode(chunk) for chunk in chunks) == b"a\xffbcd"


def test_input_escaping_and_window_size():
    nop = b"\xff\xf1"
    # IAC doubled; a NOP after a CR before LF or NUL and at the end (telnetd would drop the LF or NUL after it), and
    # after a final NUL (busybox drops a read's last NUL); other CRs and NULs as they are.
    assert escape_input(b"a\rb\r\n\xff\x00c\r\x00\r") == b"a\rb\r" + nop + b"\n\xff\xff\x00c\r" + nop + b"\x00\r" + nop
    assert escape_input(b"\x00") == b"\x00" + nop and escape_input(b"x\x00y") == b"x\x00y"
    assert naws(132, 45) == b"\xff\xfa\x1f\x00\x84\x00\x2d\xff\xf0"
    # A low byte of 255 is sent one less (read the same by every busybox); the high byte stays < 255; 0 stays 0.
    assert naws(255, 0) == b"\xff\xfa\x1f\x00\xfe\x00\x00\xff\xf0"
    assert naws(70000, 511) == b"\xff\xfa\x1f\xfe\xfe\x01\xfe\xff\xf0"


def test_held_bytes_are_passed_on_when_the_exec_ends_without_a_marker():
    recorder = Recorder()
    output = recorder.output()
    output.write(READY + b"abc\x1b]")
    assert recorder.sink.getvalue() == b"abc"
    output.finish()  # the login program was killed: no marker will come
    assert recorder.sink.getvalue() == b"abc\x1b]" and output.status is None


def test_gated_input_encodes_pushes_and_holds_at_eof():
    read_fd, write_fd = os.pipe()
    stdin = GatedInput(read_fd, encode=escape_input, hold_at_eof=True)
    try:
        stdin.push(b"<pushed>")
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(stdin.read1(4)))
        reader.start()
        reader.join(0.2)
        assert reader.is_alive()  # gated: neither pushed nor source bytes pass before open_gate
        stdin.open_gate()
        reader.join(10)
        assert got == [b"<pus"]  # pushes respect the size asked for
        assert stdin.read1(100) == b"hed>"
        os.write(write_fd, b"\xff\xff\r")
        # Encoding makes these 3 bytes 7; what exceeds the size comes next, before a push made meanwhile.
        assert stdin.read1(3) == b"\xff\xff\xff"
        stdin.push(b"[naws]")
        assert stdin.read1(100) == b"\xff\r\xff\xf1[naws]"
        os.close(write_fd)
        write_fd = -1
        # At the source's end the input stays open: a push still arrives, and only close() ends it.
        after_eof: list[bytes] = []
        reader = threading.Thread(target=lambda: after_eof.append(stdin.read1(100)))
        reader.start()
        reader.join(0.2)
        assert reader.is_alive()
        stdin.push(b"late")
        reader.join(10)
        assert after_eof == [b"late"]
        reader = threading.Thread(target=lambda: after_eof.append(stdin.read1(100)))
        reader.start()
        stdin.close()
        reader.join(10)
        assert after_eof == [b"late", b""]
    finally:
        stdin.dispose()
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
