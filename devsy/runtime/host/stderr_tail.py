"""The last lines a child process wrote to stderr, for error messages: drained always, kept bounded, redacted.

Used for a provider under its supervisor (launcher.py) and for the devsy agent serving a remote runtime
(driver/remote/link.py). The stream is always drained, so a child blocked on a full stderr pipe never looks hung.
"""

from __future__ import annotations

import collections
import threading
from typing import BinaryIO

from devsy.redaction import Redactor

TAIL_BYTES = 16 * 1024
TAIL_LINES = 20


class StderrTail:
    """Drains `stream` on a daemon thread, keeping about its last TAIL_BYTES; `text()` gives the last lines."""

    def __init__(self, stream: BinaryIO, redact: Redactor, name: str) -> None:
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._lock = threading.Lock()
        self._redact = redact
        self.done = threading.Event()  # set once the stream reached EOF (or failed)
        threading.Thread(target=self._drain, args=(stream,), daemon=True, name=name).start()

    def _drain(self, stream: BinaryIO) -> None:
        read = getattr(stream, "read1", stream.read)  # read1: whatever is there, without waiting to fill a buffer
        try:
            while chunk := read(65536):
                with self._lock:
                    self._chunks.append(chunk)
                    self._size += len(chunk)
                    while self._size > TAIL_BYTES and len(self._chunks) > 1:
                        self._size -= len(self._chunks.popleft())
        except (OSError, ValueError):
            pass  # the stream was closed under us: what was read is the tail
        finally:
            self.done.set()

    def text(self, wait: float = 0.0) -> str:
        """The last TAIL_LINES lines, redacted; first waits up to `wait` seconds for the stream's end."""
        if wait:
            self.done.wait(wait)
        with self._lock:
            raw = b"".join(self._chunks).decode("utf-8", "replace")
        return self._redact("\n".join(raw.strip().splitlines()[-TAIL_LINES:]))
