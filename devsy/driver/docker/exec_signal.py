"""The exec wrapper's signal trailer (see exec_tree.py): found in the command's stderr and removed from it.

The trailer is `\\0devsy-signal-<token>:<N>\\0`, the last bytes the wrapper writes to stderr when its command was
killed by signal N. The token is the exec's own random one, so no command's output can forge or collide with it.
Only bytes that could be the start of the trailer are held back (a NUL and what follows it, at most a marker's
length), so a prompt on stderr still reaches the reader as soon as it is written.
"""

from __future__ import annotations

import signal
from typing import BinaryIO

_PREFIX = b"\x00devsy-signal-"
_MAX_NUMBER_DIGITS = 3


def signal_name(number: int) -> str:
    """`SIGTERM` for 15; `SIG<N>` for a number Python has no name for (still a signal, still a failure)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


class SignalTrailer:
    """Writes stderr through to `target`, minus the trailer; `number` is the signal it named (0: none)."""

    def __init__(self, token: str, target: BinaryIO) -> None:
        self._marker = _PREFIX + token.encode() + b":"
        self._target = target
        self._held = b""
        self.number = 0

    def write(self, data: bytes) -> None:
        buffer = self._held + data
        self._held = b""
        while True:
            start = buffer.find(self._marker)
            if start < 0:
                break
            end = buffer.find(b"\x00", start + len(self._marker))
            if end < 0:
                break
            digits = buffer[start + len(self._marker):end]
            if not digits.isdigit() or len(digits) > _MAX_NUMBER_DIGITS:
                break  # not our trailer after all (cannot happen with the token in it): pass it through as is
            self.number = int(digits)
            buffer = buffer[:start] + buffer[end + 1:]
        keep = self._partial_suffix(buffer)
        self._held = buffer[len(buffer) - keep:] if keep else b""
        out = buffer[:len(buffer) - keep] if keep else buffer
        if out:
            self._target.write(out)

    def _partial_suffix(self, buffer: bytes) -> int:
        """How many trailing bytes of `buffer` may be the start of a trailer still arriving."""
        longest = len(self._marker) + _MAX_NUMBER_DIGITS
        start = buffer.rfind(b"\x00", max(0, len(buffer) - longest))
        while start >= 0:
            tail = buffer[start:]
            head, digits = tail[:len(self._marker)], tail[len(self._marker):]
            if self._marker.startswith(head) and (len(tail) <= len(self._marker) or digits.isdigit()):
                return len(tail)
            start = buffer.rfind(b"\x00", max(0, len(buffer) - longest), start)
        return 0

    def flush(self) -> None:
        self._target.flush()

    def close(self) -> None:
        """At the end of the output: what was held back was the command's own bytes."""
        if self._held:
            self._target.write(self._held)
            self._held = b""
        self._target.flush()
