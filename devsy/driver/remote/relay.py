"""A private Unix socket whose one connection is carried over a process's stdin and stdout.

gRPC dials the socket as it dials any provider's; the relay hands the bytes to the exec command running the remote
agent (`runtime-serve`), which hands them to the runtime's own socket on the remote machine. One connection only:
the remote runtime serves exactly one, and a second dial (gRPC reconnecting after a break) must fail, not reach a
stream that is already in use.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
from typing import BinaryIO

_CHUNK = 64 * 1024
_JOIN_S = 5.0


class SocketRelay:
    def __init__(self, to_remote: BinaryIO, from_remote_fd: int, leftover: bytes = b"") -> None:
        self._to_remote = to_remote
        self._from_remote_fd = from_remote_fd
        self._leftover = leftover
        self._dir = tempfile.mkdtemp(prefix="devsy-remote-")  # 0700: only this user can dial it
        self.path = os.path.join(self._dir, "runtime.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(1)
        self._conn: socket.socket | None = None
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.ended = threading.Event()  # either direction ended: the link is over
        self._start(self._accept, "devsy-remote-accept")

    def _start(self, target, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return  # closed before gRPC dialled
        finally:
            with contextlib.suppress(OSError):
                self._listener.close()  # one connection only
        with self._lock:
            self._conn = conn
        self._start(lambda: self._pump_up(conn), "devsy-remote-up")
        self._start(lambda: self._pump_down(conn), "devsy-remote-down")

    def _pump_up(self, conn: socket.socket) -> None:
        """gRPC -> remote. Its end closes our input to the remote agent: the end of the lease there."""
        try:
            for chunk in iter(lambda: conn.recv(_CHUNK), b""):
                view = memoryview(chunk)
                while view:  # a raw pipe may take part of a chunk
                    view = view[self._to_remote.write(view) or 0:]
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError, ValueError):
                self._to_remote.close()
            self.ended.set()

    def _pump_down(self, conn: socket.socket) -> None:
        """remote -> gRPC, starting with what arrived right after the agent's status line."""
        try:
            if self._leftover:
                conn.sendall(self._leftover)
            for chunk in iter(lambda: os.read(self._from_remote_fd, _CHUNK), b""):
                conn.sendall(chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # gRPC sees the connection end now, not at its next keepalive
            self.ended.set()

    def close(self) -> None:
        """Stop accepting, end the connection, and join the pumps (bounded: their process is being ended too)."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            conn, threads = self._conn, list(self._threads)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(_JOIN_S)
        if conn is not None:
            conn.close()
        shutil.rmtree(self._dir, ignore_errors=True)
