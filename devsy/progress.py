"""Progress on stderr for long steps, so stdout stays free for command output and the `--json` outcome."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TextIO


class Progress:
    """Prints one line when a step starts and one when it ends (with its duration); quiet mode prints nothing."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self._stream = stream or sys.stderr
        self._quiet = quiet

    def info(self, text: str) -> None:
        if not self._quiet:
            print(f"devsy: {text}", file=self._stream, flush=True)

    def raw(self, data: bytes) -> None:
        """Pass through output of a step (a build, a lifecycle command) as it arrives."""
        if not self._quiet:
            self._stream.write(data.decode("utf-8", "replace"))
            self._stream.flush()

    @contextlib.contextmanager
    def step(self, text: str) -> Iterator[None]:
        started = time.monotonic()
        self.info(f"{text} ...")
        try:
            yield
        except BaseException:
            self.info(f"{text}: failed after {time.monotonic() - started:.1f}s")
            raise
        self.info(f"{text}: done in {time.monotonic() - started:.1f}s")
