"""A socket-like object over two descriptors (pipes or a socket), for paramiko's Transport.

paramiko reads a packet as "header, then exactly the rest", calling recv(n) until it has n bytes and concatenating
what each call returns; with 64 KiB pipe reads a large packet would be copied over and over. So a large recv(n)
(a packet body, which the peer is certainly sending) gathers up to n bytes as they arrive and joins them once. Small
reads (the banner, a header) return what is there, because paramiko may ask for more than the peer will send before
it answers. Timeouts still apply: paramiko's transport thread relies on them to notice that it was closed.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
from collections.abc import Callable
from typing import Optional

_READ_SIZE = 1024 * 1024
_GATHER_FROM = 4096  # recv sizes from which we wait for the rest (paramiko asks for exact packet bodies)
_F_SETPIPE_SZ = 1031  # linux/fcntl.h; a larger pipe means fewer, larger reads and writes


def enlarge_pipe(fd: int, size: int = _READ_SIZE) -> None:
    """Best effort: make a pipe hold `size` bytes (no effect on non-pipes or past the system's limit)."""
    try:
        fcntl.fcntl(fd, _F_SETPIPE_SZ, size)
    except OSError:
        pass


class PipeSocket:
    def __init__(self, read_fd: int, write_fd: int, on_close: Optional[Callable[[], None]] = None) -> None:
        self._rfd = read_fd
        self._wfd = write_fd
        self._on_close = on_close
        self._timeout: Optional[float] = None
        # Taking from the front of a bytearray is cheap (CPython moves its start), so the unread rest is never
        # copied when a small piece (a packet header) is taken; the chunk handed out is the only copy.
        self._buf = bytearray()
        self._closed = False  # paramiko's Transport.close() reads this attribute of its socket

    def settimeout(self, timeout: Optional[float]) -> None:
        self._timeout = timeout

    def gettimeout(self) -> Optional[float]:
        return self._timeout

    def recv(self, size: int) -> bytes:
        buf = self._buf
        while len(buf) < size and not self._closed:
            if buf and size < _GATHER_FROM:
                break
            if not self._wait_readable():
                if buf:
                    break  # a timeout with data in hand: hand over what we have
                raise socket.timeout()
            data = os.read(self._rfd, max(_READ_SIZE, size - len(buf)))
            if not data:
                break
            buf += data
        with memoryview(buf) as view:
            chunk = bytes(view[:size])
        del buf[:size]
        return chunk

    def _wait_readable(self) -> bool:
        if self._timeout is None:
            return True
        poller = select.poll()  # not select(): the SSH master may hold descriptors past 1023
        poller.register(self._rfd, select.POLLIN)
        return bool(poller.poll(self._timeout * 1000))

    def send(self, data: bytes) -> int:
        if self._closed:
            raise OSError("the SSH stream is closed")
        return os.write(self._wfd, data)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self.send(view):]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close()
