"""Reading a child's output in tests without ever blocking past a deadline."""

from __future__ import annotations

import os
import select
import time
from typing import IO


def read_line(stream: IO[bytes] | int, timeout: float = 60) -> bytes:
    """One line from `stream` (a pipe or its descriptor), read a byte at a time so nothing after it is consumed;
    what arrived by `timeout`, or before the end of the stream, when no newline came."""
    fd = stream if isinstance(stream, int) else stream.fileno()
    deadline, line = time.monotonic() + timeout, b""
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 1)
        if not chunk:
            break
        line += chunk
    return line
