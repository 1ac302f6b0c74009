"""Copying a command's stdin into its transport until end of file, and stopping that copy promptly.

One pump serves every transport (docker exec, msb exec, the SSH channel): `sink` writes bytes, `on_eof` half-closes.
At end of input, or when reading the input fails, the pump calls `on_eof` so the command is not left waiting. When
it was stopped (the command ended, or was cancelled) it does not: a cancelled command must not see a clean end of
input and exit normally before it is killed.

An input that cannot be read (a descriptor open for writing only, as `nohup` leaves a terminal, or a terminal that
is gone) ends the input, as it does for OpenSSH's client: the command runs, sees end of file, and its exit status is
the session's (`input_error` says why the input ended). Only a failure to deliver input (`error`: the transport's)
is the session's failure.

A stream with a descriptor (a tty, pipe, socket or file) is watched with poll() together with a wake pipe, so
stop() ends the loop at once without closing anything. A stream without a descriptor can only be unblocked by
closing it, which stop() does only when we own it. A caller-owned stream is never closed; an owned one is closed
when the copy is over.

A background job's read of its terminal is one the kernel stops (SIGTTIN) and restarts once the job is continued, so
`kill %N` could not end a job stopped that way. The pump does not read its controlling terminal from the background
where the kernel would stop it: it stops the job itself and waits for the foreground (job_control.py).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import select
import signal
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

from devsy import job_control

log = logging.getLogger("devsy.stdin_pump")

_CHUNK = 1024 * 1024
# How long through_pipe waits for its copier to end once stopped: it is then between a poll() and a read of input
# that poll() said is there, or writing into a pipe whose last reader it has just lost.
_JOIN_S = 2.0


def write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written (it may write less, e.g. when a signal interrupts a large write)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class StdinPump(threading.Thread):
    def __init__(self, source: BinaryIO, sink: Callable[[bytes], None], on_eof: Callable[[], None], *,
                 owns_source: bool = False) -> None:
        super().__init__(name="devsy-ssh-stdin", daemon=True)
        self._source = source
        self._sink = sink
        self._on_eof = on_eof
        self._owns = owns_source
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._wake_lock = threading.Lock()  # the wake pipe is closed by run() and written by stop()
        self._wake_open = True
        self.error: BaseException | None = None  # delivering input failed (the sink's error)
        self.input_error: OSError | ValueError | None = None  # reading the input failed: it ended there

    def stop(self) -> None:
        """End the copy loop; closes the source only if we own it and it has no descriptor to wait on."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        with self._wake_lock:
            if self._wake_open:
                os.write(self._wake_w, b"!")
        if self._owns and _fileno(self._source) is None:
            try:
                self._source.close()
            except (OSError, ValueError):
                pass

    def run(self) -> None:
        try:
            self._copy()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command stopped reading; it may exit without reading all of its input, that is its right
        except (OSError, ValueError, EOFError) as exc:
            if not self._stopping.is_set():
                self.error = exc  # the session may already be gone; the caller decides whether it matters
        finally:
            with self._wake_lock:
                self._wake_open = False
                os.close(self._wake_r)
                os.close(self._wake_w)
            if not self._stopping.is_set():
                with contextlib.suppress(OSError, EOFError):
                    self._on_eof()
            if self._owns:
                with contextlib.suppress(OSError, ValueError):
                    self._source.close()  # ours to close once the copy is over, however it ended

    def _copy(self) -> None:
        fd = _fileno(self._source)
        poller = select.poll()  # not select(): a busy process (the SSH master) may hold descriptors past 1023
        if fd is not None:
            poller.register(fd, select.POLLIN)
            poller.register(self._wake_r, select.POLLIN)
        terminal = fd is not None and os.isatty(fd)
        while not self._stopping.is_set():
            if fd is not None:
                if self._wake_r in dict(poller.poll()):
                    return
                if terminal and job_control.would_stop(fd, signal.SIGTTIN):
                    try:
                        if not job_control.stop_until_foreground(fd, signal.SIGTTIN, self._stopping.wait):
                            return  # stopped meanwhile
                    except job_control.TerminalLost:
                        pass  # the read below lets the kernel say what is left of it (EIO, mostly)
                    continue
            try:
                data = self._read(fd)
            except (OSError, ValueError) as exc:
                if isinstance(exc, BlockingIOError) and fd is not None:
                    continue  # a non-blocking input another reader emptied after poll(): the next poll() waits
                # Anything else ends the input; so does EAGAIN from a source without a descriptor, as nothing here
                # can wait for it (GatedInput, which has none, waits itself and never raises it).
                if not self._stopping.is_set():  # else the read failed because stop() closed an owned source
                    self.input_error = exc
                    # At info: only the SSH master logs at that level (ssh-master.log); a command's run stays quiet.
                    log.info("reading the command's input failed (%s: %s): the input ends there",
                             type(exc).__name__, exc)
                return
            if self._stopping.is_set():
                return
            if not data:
                return
            self._sink(data)

    def _read(self, fd: int | None) -> bytes:
        if fd is not None:
            return os.read(fd, _CHUNK)
        read1 = getattr(self._source, "read1", None)
        return read1(_CHUNK) if read1 else self._source.read(_CHUNK)


def _fileno(stream: BinaryIO) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None


class PipedInput:
    """A descriptor's input, read by this process and copied into a pipe whose read end (`read_end`) another process
    is given. Nothing is read before start(): what is typed until then stays where it is (for whoever reads next)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.read_end, self._write_end = os.pipe()
        self._write_closed = False
        self._copier: StdinPump | None = None

    def start(self) -> None:
        """Begin the copy; later calls do nothing."""
        if self._copier is not None:
            return
        self._copier = StdinPump(open(self._fd, "rb", buffering=0, closefd=False),
                                 functools.partial(write_all, self._write_end), self._close_write_end)
        self._copier.start()

    def close(self) -> None:
        """Stop the copy and close both ends of the pipe; the input itself stays open (it is the caller's)."""
        copier = self._copier
        if copier is not None:
            copier.stop()
        os.close(self.read_end)  # a copy blocked on a full pipe then fails (EPIPE) once the other process let go of it
        if copier is not None:
            copier.join(_JOIN_S)
            if copier.is_alive():
                return  # still in a read or a write: its descriptor is left to the exit rather than closed under it
        if not self._write_closed:
            os.close(self._write_end)

    def _close_write_end(self) -> None:  # end of input: the other process reads end of file
        self._write_closed = True
        os.close(self._write_end)


@contextlib.contextmanager
def through_pipe(fd: int) -> Iterator[PipedInput]:
    """`fd`'s input passed to another process through a pipe (PipedInput), closed when the context ends.

    Why: a terminal's job control applies to whoever reads it. A background job that reads its terminal is stopped
    (SIGTTIN) until the user brings it to the foreground, as `devsy exec` on the driver's path is and as OpenSSH is.
    Another process given the terminal itself (the SSH master, in its own session) is not stopped, and would take what
    the user types at their shell. Reading it here keeps the job control this process's.

    The copy is StdinPump's, whose job control also lets `kill %N` end a job stopped that way.
    """
    piped = PipedInput(fd)
    try:
        yield piped
    finally:
        piped.close()
