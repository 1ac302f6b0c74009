"""stdin_pump.through_pipe: a descriptor's input copied into a pipe for another process, every byte, its end of file
passed on, nothing read before start(), and nothing left behind (thread or descriptor) when the context ends with the
input still open."""

from __future__ import annotations

import fcntl
import os
import threading

from devsy.stdin_pump import through_pipe


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _read_to_eof(fd: int) -> bytes:
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    return data


def _copiers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "devsy-ssh-stdin"]


def test_every_byte_and_the_end_of_input_reach_the_pipe() -> None:
    source_r, source_w = os.pipe()
    payload = os.urandom(300_000) + b"\x00\r\n\x04"  # more than a pipe holds: the copy waits for its reader
    writer = threading.Thread(target=lambda: (os.write(source_w, payload), os.close(source_w)))
    with through_pipe(source_r) as piped:
        piped.start()
        writer.start()
        assert _read_to_eof(piped.read_end) == payload
    writer.join()
    os.close(source_r)  # the caller's descriptor: through_pipe never closes it


def test_leaving_with_the_input_still_open_stops_the_copy_and_closes_its_descriptors() -> None:
    source_r, source_w = os.pipe()
    before = _open_fds()
    with through_pipe(source_r) as piped:
        piped.start()
        os.write(source_w, b"typed\n")
        assert os.read(piped.read_end, 100) == b"typed\n"
    assert _open_fds() == before
    assert not _copiers()
    os.write(source_w, b"after\n")  # nobody reads it now: it stays in the caller's input
    assert os.read(source_r, 100) == b"after\n"
    os.close(source_r)
    os.close(source_w)


def test_a_reader_that_stopped_reading_does_not_hold_the_copy() -> None:
    """The other process let go of a full pipe: leaving the context ends the copy blocked on it (EPIPE)."""
    source_r, source_w = os.pipe()
    before = _open_fds()
    with through_pipe(source_r) as piped:
        piped.start()
        # More than the copy's pipe holds, so the copy blocks on it; less than that pipe, the input's pipe and what the
        # copy holds together, so all of it leaves the filler.
        size = fcntl.fcntl(piped.read_end, fcntl.F_GETPIPE_SZ) + fcntl.fcntl(source_r, fcntl.F_GETPIPE_SZ) // 2
        filler = threading.Thread(target=lambda: os.write(source_w, b"x" * size))
        filler.start()
        filler.join(10)
        assert not filler.is_alive()
    assert _open_fds() == before
    assert not _copiers()
    os.close(source_r)
    os.close(source_w)


def test_nothing_is_read_before_start_and_an_unstarted_copy_leaves_nothing_behind() -> None:
    """Typed ahead of a command that never started: it stays in the input for whoever reads next."""
    source_r, source_w = os.pipe()
    before = _open_fds()
    os.write(source_w, b"typed ahead\n")
    with through_pipe(source_r):
        assert not _copiers()  # nothing reads the input yet
    assert _open_fds() == before
    assert not _copiers()
    assert os.read(source_r, 100) == b"typed ahead\n"
    os.close(source_r)
    os.close(source_w)
