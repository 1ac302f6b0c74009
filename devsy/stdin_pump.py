"""Copying a command's stdin into its transport until end of file, and stopping that copy promptly.

One pump serves every transport (docker exec, msb exec, the SSH channel): `sink` writes bytes, `on_eof` half-closes.
At end of input, or when reading the input fails, the pump calls `on_eof` so the command is not left waiting. When
it was stopped (the command ended, or was cancelled) it does not: a cancelled command must not see a clean end of
input and exit normally before it is killed.

A stream with a descriptor (a tty, pipe, socket or file) is watched with poll() together with a wake pipe, so
stop() ends the loop at once without closing anything. A stream without a descriptor can only be unblocked by
closing it, which stop() does only when we own it. A caller-owned stream is never closed; an owned one is closed
when the copy is over.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import threading
from collections.abc import Callable
from typing import BinaryIO

_CHUNK = 1024 * 1024


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
        while not self._stopping.is_set():
            if fd is not None:
                if self._wake_r in dict(poller.poll()):
                    return
                data = os.read(fd, _CHUNK)
            else:
                read1 = getattr(self._source, "read1", None)
                data = read1(_CHUNK) if read1 else self._source.read(_CHUNK)
            if self._stopping.is_set():
                return
            if not data:
                return
            self._sink(data)


def _fileno(stream: BinaryIO) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None
