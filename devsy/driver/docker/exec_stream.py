"""One `docker exec` with raw, separate stdout/stderr, streamed stdin, and cancellation.

The engine hijacks the HTTP connection for an attached exec and multiplexes stdout and stderr into frames with an
8-byte header (stream id, length). We read through the HTTP response's buffered reader, not the raw socket, so that
bytes the reader may already have buffered after the response headers are never lost; we write stdin straight to the
socket and half-close it at EOF so the command sees end of input while its output keeps flowing.
"""

from __future__ import annotations

import contextlib
import io
import socket
import struct
import threading
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # the SDK, imported by whoever made the client (engine.py)
    import docker

_HEADER = struct.Struct(">BxxxL")
_STDOUT, _STDERR = 1, 2
_CHUNK = 64 * 1024


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


def pump_output(attached: AttachedExec, stdout: BinaryIO, stderr: BinaryIO) -> None:
    """Copy frames to the caller's streams until the exec's output ends."""
    for stream, data in attached.frames():
        target = stderr if stream == _STDERR else stdout
        target.write(data)
        target.flush()
