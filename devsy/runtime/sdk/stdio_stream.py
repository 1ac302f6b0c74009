"""The provider's side of go-plugin's `plugin.GRPCStdio/StreamStdio`, done as go-plugin's server does it.

go-plugin points a Go provider's os.Stdout and os.Stderr (the variables, not the file descriptors) at pipes whose
data it serves through this stream, and a write blocks once nobody drains it (backpressure: a host that subscribes
loses nothing). devsy's SDK does the same for `sys.stdout` after the handshake: what a provider prints there reaches
a host that subscribes (devsy's and go-plugin's hosts do), chunk by chunk, in order. `sys.stderr` and file
descriptors 1 and 2 stay on the provider's stderr, which every host drains itself (a crash's traceback then reaches
the host's error messages). Closing the stream at shutdown releases any blocked writer and drops what is left.
"""

from __future__ import annotations

import collections
import io
import os
import threading

import grpc

from devsy.runtime.goplugin import grpc_stdio_pb2, grpc_stdio_pb2_grpc

# What may wait for the host: above it, writers block until the host drains (go-plugin: a 64 KiB OS pipe).
BUFFER_BYTES = 256 * 1024
CHUNK_BYTES = 16 * 1024  # one StdioData message at most


class StdioStream:
    """A bounded queue of (channel, bytes) between the provider's writers and the StreamStdio handlers."""

    def __init__(self, limit: int = BUFFER_BYTES) -> None:
        self._chunks: collections.deque[tuple[int, bytes]] = collections.deque()
        self._size = 0
        self._limit = limit
        self._changed = threading.Condition()
        self.closed = False

    def write(self, channel: int, data: bytes) -> None:
        """Queue `data`; blocks while the queue is full and the stream is open (dropped once it is closed)."""
        for start in range(0, len(data), CHUNK_BYTES):
            piece = data[start:start + CHUNK_BYTES]
            with self._changed:
                self._changed.wait_for(lambda: self.closed or self._size + len(piece) <= self._limit)
                if self.closed:
                    return
                self._chunks.append((channel, piece))
                self._size += len(piece)
                self._changed.notify_all()

    def next(self, gone: threading.Event) -> tuple[int, bytes] | None:
        """The oldest chunk; None once the stream is closed or `gone` is set (the host left)."""
        with self._changed:
            self._changed.wait_for(lambda: self._chunks or self.closed or gone.is_set())
            if self.closed or gone.is_set():
                return None
            channel, data = self._chunks.popleft()
            self._size -= len(data)
            self._changed.notify_all()
            return channel, data

    def wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self.closed = True
            self._chunks.clear()
            self._size = 0
            self._changed.notify_all()


class StdioServicer(grpc_stdio_pb2_grpc.GRPCStdioServicer):
    """Serves the queue; the stream ends (OK) when the provider shuts down, or when the host goes away."""

    def __init__(self, stream: StdioStream) -> None:
        self._stream = stream

    def StreamStdio(self, request, context: grpc.ServicerContext):  # noqa: N802 - gRPC method name
        gone = threading.Event()

        def left() -> None:
            gone.set()
            self._stream.wake()

        if not context.add_callback(left):
            return  # the call has ended already
        while (item := self._stream.next(gone)) is not None:
            yield grpc_stdio_pb2.StdioData(channel=item[0], data=item[1])


def _carry(read_fd: int, stream: StdioStream, channel: int) -> None:
    """Move the pipe's bytes into the stream until every writer has closed it (once the stream is closed they are
    dropped, so a writer blocked on a full pipe is released)."""
    with open(read_fd, "rb", buffering=0) as pipe:
        while data := pipe.read(CHUNK_BYTES):
            stream.write(channel, data)


def stdout_writer(stream: StdioStream) -> io.TextIOWrapper:
    """A `sys.stdout` whose text goes to the stream's STDOUT channel, line-buffered as a terminal's would be. It is a
    pipe, as go-plugin's os.Stdout is: code that needs a file descriptor (a child given `stdout=sys.stdout`,
    `fileno()`) works, and its bytes travel the same way, held back by the same bounds."""
    read_fd, write_fd = os.pipe()
    threading.Thread(target=_carry, args=(read_fd, stream, grpc_stdio_pb2.StdioData.STDOUT), daemon=True,
                     name="stdio-stdout").start()
    return io.TextIOWrapper(io.BufferedWriter(io.FileIO(write_fd, "w"), CHUNK_BYTES), encoding="utf-8",
                            errors="backslashreplace", line_buffering=True)
