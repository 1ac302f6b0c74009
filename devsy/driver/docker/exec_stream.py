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
# One read takes whatever the connection holds, up to this: with fast output that is many frames (the engine frames
# each write of the command's, at most 32 KiB), passed on as one piece per stream instead of one per frame.
_READ_SIZE = 1024 * 1024


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
        demux = FrameDemuxer()
        while True:
            data = self._read_some(_READ_SIZE)
            if not data:
                return
            yield from demux.feed(data)

    def _read_some(self, n: int) -> bytes:
        try:
            return self._reader.read1(n)
        except (OSError, ValueError):
            if self._closed.is_set():
                return b""
            raise

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


class FrameDemuxer:
    """Splits the engine's framed stream back into stdout and stderr, whatever the read boundaries (a header may
    be cut between two reads). Each feed() gives the data of consecutive frames of one stream as one piece."""

    def __init__(self) -> None:
        self._header = b""  # the start of a header cut by the end of the previous read
        self._stream = _STDOUT  # the frame being read ...
        self._left = 0  # ... and how many of its bytes are still to come

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        run: list[memoryview] = []  # consecutive pieces of one stream, joined once
        run_stream = self._stream
        with memoryview(data) as view:
            pos = 0
            while pos < len(data):
                if self._left == 0:
                    take = min(_HEADER.size - len(self._header), len(data) - pos)
                    self._header += data[pos:pos + take]
                    pos += take
                    if len(self._header) == _HEADER.size:
                        self._stream, self._left = _HEADER.unpack(self._header)
                        self._header = b""
                    continue
                take = min(self._left, len(data) - pos)
                if run and self._stream != run_stream:
                    out.append((run_stream, _joined(run)))
                    run = []
                run_stream = self._stream
                run.append(view[pos:pos + take])
                pos += take
                self._left -= take
            if run:
                out.append((run_stream, _joined(run)))
        return out


def _joined(pieces: list[memoryview]) -> bytes:
    whole = pieces[0].obj
    if len(pieces) == 1 and len(pieces[0]) == len(whole):
        return whole  # the read held nothing but this data (no header): no copy
    return b"".join(pieces)


def pump_output(attached: AttachedExec, stdout: BinaryIO, stderr: BinaryIO) -> None:
    """Copy frames to the caller's streams until the exec's output ends."""
    for stream, data in attached.frames():
        target = stderr if stream == _STDERR else stdout
        target.write(data)
        target.flush()
