"""A bounded hand-over between a driver thread that writes output and the gRPC thread that sends it.

Writers block while the channel is full: that is the backpressure path from a slow reader on the host, through
HTTP/2 flow control and this channel, into the driver (which stops reading its backend). The final outcome is
always accepted, so a finishing driver never blocks on a stream nobody reads.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devsy.runtime.wire.constants import MAX_FRAME


@dataclass
class Outcome:
    """How the driver call ended: a result or an exception."""

    result: Any = None
    error: BaseException | None = None


class BoundedChannel:
    def __init__(self, capacity: int) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._cond = threading.Condition()
        self._capacity = capacity
        self._closed = False

    def put(self, item: Any) -> None:
        """Block while full; BrokenPipeError once closed (the RPC is over: the writer should stop)."""
        with self._cond:
            while len(self._items) >= self._capacity and not self._closed:
                self._cond.wait()
            if self._closed:
                raise BrokenPipeError("the stream's reader is gone")
            self._items.append(item)
            self._cond.notify_all()

    def finish(self, outcome: Outcome) -> None:
        with self._cond:
            self._items.append(outcome)
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> Any:
        """The next item, or None when `timeout` passes first."""
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._items), timeout):
                return None
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class FrameWriter:
    """A binary stream for drivers: every write becomes frames of 1..MAX_FRAME bytes on the channel."""

    def __init__(self, channel: BoundedChannel, frame: Callable[[bytes], Any]) -> None:
        self._channel = channel
        self._frame = frame
        self.closed = False

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        for start in range(0, len(view), MAX_FRAME):
            self._channel.put(self._frame(bytes(view[start:start + MAX_FRAME])))
        return len(view)

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True
