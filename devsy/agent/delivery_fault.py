"""Test-only fault injection and tracing for agent delivery, so a scenario can drive the real CLI through a retry.

Nothing here is active unless its environment variable is set; ordinary users never set them.

- `DEVSY_AGENT_DELIVERY_FAULT=interrupt-first`: the first transfer's source ends (end of file) halfway through the
  agent, as a transfer cut off mid-stream does; the guest's checksum check rejects it and delivery retries.
- `DEVSY_AGENT_DELIVERY_TRACE=PATH`: append one JSON object per line to PATH for each delivery event: `present`
  (skipped), `attempt`, `open` and `close` of each source (with the bytes read from it), `interrupt`, `failed`,
  `delivered`. A source closed twice shows two `close` lines, a reused source one `open` for two attempts.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from devsy.agent.errors import AgentError

FAULT_ENV = "DEVSY_AGENT_DELIVERY_FAULT"
TRACE_ENV = "DEVSY_AGENT_DELIVERY_TRACE"
INTERRUPT_FIRST = "interrupt-first"
FAULTS = (INTERRUPT_FIRST,)


class DeliveryTrace:
    """Appends delivery events to the file named by DEVSY_AGENT_DELIVERY_TRACE (a no-op when it is unset)."""

    def __init__(self, path: str = "") -> None:
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> DeliveryTrace:
        return cls(os.environ.get(TRACE_ENV, ""))

    def event(self, name: str, **fields: Any) -> None:
        if not self.path:
            return
        line = json.dumps({"event": name, **fields}, sort_keys=True) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)


class _TracedSource(io.RawIOBase):
    """One source as delivery sees it: counts the bytes read, traces every close() call, may end early."""

    def __init__(self, source: BinaryIO, number: int, trace: DeliveryTrace, stop_after: int | None) -> None:
        super().__init__()
        self._source, self._number, self._trace, self._stop_after = source, number, trace, stop_after
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        limit = len(buffer)
        if self._stop_after is not None:
            limit = min(limit, self._stop_after - self.bytes_read)
            if limit <= 0:
                self._trace.event("interrupt", source=self._number, after_bytes=self.bytes_read)
                return 0
        data = self._source.read(limit)
        buffer[: len(data)] = data
        self.bytes_read += len(data)
        return len(data)

    def close(self) -> None:
        # Traced on every call, not only the first: the trace must show a double close if one ever happens.
        self._trace.event("close", source=self._number, bytes_read=self.bytes_read)
        self._source.close()
        super().close()

    def __del__(self) -> None:
        # Replaces IOBase's finalizer, which would close (and so trace) a source delivery forgot to close.
        if not self.closed:
            self._trace.event("unclosed", source=self._number, bytes_read=self.bytes_read)


def instrument(opener: Callable[[], BinaryIO], size: int, trace: DeliveryTrace) -> Callable[[], BinaryIO]:
    """`opener` itself when no fault or trace is configured, else one that numbers, traces and maybe cuts sources."""
    fault = os.environ.get(FAULT_ENV, "")
    if fault and fault not in FAULTS:
        raise AgentError(f"{FAULT_ENV}={fault!r} is not a known fault", hint=f"use one of: {', '.join(FAULTS)}")
    if not fault and not trace.path:
        return opener
    opened = 0

    def open_instrumented() -> BinaryIO:
        nonlocal opened
        opened += 1
        source = opener()
        trace.event("open", source=opened)
        stop_after = size // 2 if fault == INTERRUPT_FIRST and opened == 1 else None
        return _TracedSource(source, opened, trace, stop_after)  # type: ignore[return-value]

    return open_instrumented
