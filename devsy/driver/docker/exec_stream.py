"""One `docker exec` with raw, separate stdout/stderr, streamed stdin, and cancellation.

The engine hijacks the HTTP connection for an attached exec and multiplexes stdout and stderr into frames with an
8-byte header (stream id, length). We read through the HTTP response's buffered reader, not the raw socket, so that
bytes the reader may already have buffered after the response headers are never lost; we write stdin straight to the
socket and half-close it at EOF so the command sees end of input while its output keeps flowing.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import socket
import struct
import threading
from typing import BinaryIO

import docker

from devsy.driver.base import ExecRequest
from devsy.errors import DriverError

_HEADER = struct.Struct(">BxxxL")
_STDOUT, _STDERR = 1, 2
_CHUNK = 64 * 1024
# How often a copier blocked on a caller-owned descriptor looks at its stop flag. The wait itself is select() on
# the descriptor, so data is forwarded immediately; this only bounds how late a stop is noticed.
_STOP_POLL_S = 0.2


class AttachedExec:
    """The hijacked connection of a started exec: read frames, write stdin, half-close, close."""

    def __init__(self, api: docker.APIClient, exec_id: str) -> None:
        response = api._post_json(  # noqa: SLF001 - the SDK's exec_start hides the buffered reader we need
            api._url("/exec/{0}/start", exec_id),  # noqa: SLF001
            headers={"Connection": "Upgrade", "Upgrade": "tcp"},
            data={"Tty": False, "Detach": False},
            stream=True,
        )
        api._raise_for_status(response)  # noqa: SLF001
        self._response = response
        self._reader: io.BufferedReader = response.raw._fp.fp  # noqa: SLF001
        raw = self._reader.raw
        self._sock: socket.socket = getattr(raw, "_sock", raw)
        self._sock.settimeout(None)
        self._closed = threading.Event()

    def frames(self):
        """Yield (stream id, bytes) until the engine ends the stream."""
        while True:
            header = self._read_exactly(_HEADER.size)
            if header is None:
                return
            stream, size = _HEADER.unpack(header)
            while size > 0:
                data = self._read_some(min(size, _CHUNK))
                if not data:
                    return
                size -= len(data)
                yield stream, data

    def _read_some(self, n: int) -> bytes:
        try:
            return self._reader.read1(n)
        except (OSError, ValueError):
            if self._closed.is_set():
                return b""
            raise

    def _read_exactly(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            data = self._read_some(n - len(buf))
            if not data:
                return None
            buf += data
        return buf

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def close_stdin(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self._response.close()


class StdinCopier(threading.Thread):
    """Copies the request's stdin into the exec, then half-closes. Never closes a caller-owned stream."""

    def __init__(self, request: ExecRequest, target: AttachedExec) -> None:
        super().__init__(name="devsy-exec-stdin", daemon=True)
        self._request = request
        self._target = target
        self._stopping = threading.Event()
        self.error: BaseException | None = None

    def stop(self) -> None:
        """Ask the copy loop to end; closes stdin only when the driver owns it (so a blocked read returns)."""
        self._stopping.set()
        if self._request.owns_stdin and self._request.stdin is not None:
            with contextlib.suppress(Exception):
                self._request.stdin.close()

    def run(self) -> None:
        try:
            if self._request.stdin is not None:
                self._copy(self._request.stdin)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command exited without reading all of its input: that is its right
        except (OSError, ValueError) as exc:
            if not self._stopping.is_set():
                self.error = exc
        finally:
            self._target.close_stdin()

    def _copy(self, source: BinaryIO) -> None:
        fd = _fileno(source)
        while not self._stopping.is_set():
            if fd is not None and not self._readable(fd):
                continue
            data = _read_chunk(source, fd)
            if not data:
                return
            self._target.send(data)

    def _readable(self, fd: int) -> bool:
        ready, _, _ = select.select([fd], [], [], _STOP_POLL_S)
        return bool(ready)


def _fileno(stream: BinaryIO) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None


def _read_chunk(stream: BinaryIO, fd: int | None) -> bytes:
    # With a descriptor we read it directly (select() said it is readable, so this does not block); callers hand
    # over streams with nothing already buffered in Python (the CLI passes its untouched stdin).
    if fd is not None:
        return os.read(fd, _CHUNK)
    read1 = getattr(stream, "read1", None)
    return read1(_CHUNK) if read1 else stream.read(_CHUNK)


def pump_output(attached: AttachedExec, stdout: BinaryIO, stderr: BinaryIO) -> None:
    """Copy frames to the caller's streams until the exec's output ends."""
    for stream, data in attached.frames():
        target = stderr if stream == _STDERR else stdout
        target.write(data)
        target.flush()


def raise_copy_error(copier: StdinCopier) -> None:
    if copier.error is not None:
        raise DriverError(f"copying stdin into the command failed: {copier.error}") from copier.error
