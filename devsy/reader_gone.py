"""Whether the reader of devsy's output went away while a command ran: `devsy exec WS yes | head -1`.

A shell reports a pipeline member killed by SIGPIPE as 141 (128+13). Python ignores SIGPIPE, so a write to the closed
pipe raises BrokenPipeError in whichever layer copies the command's output (a driver, the external provider's
client), and each then ends the command as cancelled. The output is watched once, here, so that `devsy exec` exits
141 whichever driver or provider ran the command, as it does through the workspace's SSH master (ssh/client.py).
"""

from __future__ import annotations

from typing import Any, BinaryIO

READER_GONE_EXIT = 141  # 128 + SIGPIPE: what a shell shows for a pipeline member whose reader went away


class WatchedOutput:
    """`target`, noting whether a write or flush found its reader gone (the BrokenPipeError still reaches the caller,
    which ends the command)."""

    def __init__(self, target: BinaryIO) -> None:
        self._target = target
        self.reader_gone = False

    def write(self, data: bytes) -> int:
        try:
            return self._target.write(data)
        except BrokenPipeError:
            self.reader_gone = True
            raise

    def flush(self) -> None:
        try:
            self._target.flush()
        except BrokenPipeError:
            self.reader_gone = True
            raise

    def __getattr__(self, name: str) -> Any:  # fileno, closed, ...: the target's own
        return getattr(self._target, name)
