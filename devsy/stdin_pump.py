"""Copying a command's stdin into its transport until end of file, and stopping that copy promptly.

One pump serves every transport (docker exec, msb exec, the SSH channel): `sink` writes bytes, `on_eof` half-closes.
At end of input, or when reading the input fails, the pump calls `on_eof` so the command is not left waiting. When
it was stopped (the command ended, or was cancelled) it does not: a cancelled command must not see a clean end of
input and exit normally before it is killed.

A stream with a descriptor (a tty, pipe, socket or file) is watched with poll() together with a wake pipe, so
stop() ends the loop at once without closing anything. A stream without a descriptor can only be unblocked by
closing it, which stop() does only when we own it. A caller-owned stream is never closed; an owned one is closed
when the copy is over.

A background job's read of its terminal is one the kernel stops (SIGTTIN) and, once the job is continued, restarts
on its own: a job continued still in the background (`kill %N` sends SIGTERM, then SIGCONT) is stopped again before
its main thread can act on the signal, and `kill %N` never ends it. So the pump does not read its controlling terminal
from the background where the kernel would stop it: it stops the job itself (SIGTTIN to its process group), and once
continued it waits for the foreground (or for stop()) without reading. The job then runs, and a SIGTERM that came
with the SIGCONT ends it (termination.py hears it from whichever thread took it). A job continued in the background
(`bg`) waits for the foreground the same way rather than stopping again.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import select
import signal
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

_CHUNK = 1024 * 1024
# How often a job continued in the background looks whether it has the terminal yet (no event says so).
_FOREGROUND_POLL_MS = 200
# How far up the process tree the orphaned-group check goes (a job's own chain of wrappers is short).
_ANCESTORS_LOOKED_AT = 16
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
        self.error: BaseException | None = None

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
                if terminal and _reading_would_stop(fd):
                    if not self._stop_until_foreground(fd):
                        return
                    continue
                data = os.read(fd, _CHUNK)
            else:
                read1 = getattr(self._source, "read1", None)
                data = read1(_CHUNK) if read1 else self._source.read(_CHUNK)
            if self._stopping.is_set():
                return
            if not data:
                return
            self._sink(data)

    def _stop_until_foreground(self, fd: int) -> bool:
        """Stop our job as the kernel stops a background read (SIGTTIN to the process group); once continued, wait
        without reading until the job has the terminal (True) or the copy is stopped (False)."""
        os.killpg(os.getpgrp(), signal.SIGTTIN)  # returns once the job is continued
        waiter = select.poll()
        waiter.register(self._wake_r, select.POLLIN)
        while _reading_would_stop(fd):
            if waiter.poll(_FOREGROUND_POLL_MS):
                return False
        return True


def _reading_would_stop(fd: int) -> bool:
    """Whether the kernel would stop our job (SIGTTIN) if we read terminal `fd` now: it is our controlling terminal,
    another process group has it, SIGTTIN is neither ignored nor blocked, and the group is not orphaned (otherwise
    the read fails with EIO). Where that is not clear-cut, the read itself lets the kernel decide.

    The kernel checks and stops in one step; this cannot. A `fg` landing between the last check here (the terminal's
    owner, done last for that reason) and the stop leaves the job stopped in the foreground: the shell says so, and
    `fg` again continues it."""
    if signal.getsignal(signal.SIGTTIN) is signal.SIG_IGN or signal.SIGTTIN in signal.pthread_sigmask(
            signal.SIG_BLOCK, []):
        return False
    try:
        if os.tcgetpgrp(fd) == os.getpgrp():
            return False
    except OSError:
        return False  # not our controlling terminal: no job control applies to reading it
    if not _run_by_a_shell_outside_the_group():
        return False
    try:
        return os.tcgetpgrp(fd) != os.getpgrp()
    except OSError:
        return False


def _run_by_a_shell_outside_the_group() -> bool:
    """Whether the nearest ancestor outside our process group is in our session: the shell that runs the job (our
    parent, or a wrapper script's). Then the group is not orphaned."""
    group, session = os.getpgrp(), os.getsid(0)
    pid = os.getpid()
    for _ in range(_ANCESTORS_LOOKED_AT):
        parent = _parent_of(pid)
        if parent is None or parent <= 1:
            return False
        try:
            if os.getpgid(parent) != group:
                return os.getsid(parent) == session
        except OSError:
            return False  # gone meanwhile
        pid = parent
    return False


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after its last ')'
            return int(stat.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


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
