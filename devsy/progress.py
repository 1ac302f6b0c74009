"""Progress on stderr for long steps, so stdout stays free for command output and the `--json` outcome.

Everything Progress prints is devsy's own output, so it passes the redaction filter (devsy/redaction.py): the
configured secrets and the values this process registered (containerEnv, remoteEnv, build args) are masked, in step
lines and in the live output of builds and lifecycle commands alike.
"""

from __future__ import annotations

import codecs
import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from devsy.redaction import RedactingWriter, configured_secrets, redact_text, registered_count


class _TextTarget:
    """The binary side of a text stream: decodes UTF-8 incrementally, so a character split across chunks survives."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.at_line_start = True

    def write(self, data: bytes) -> int:
        text = self._decoder.decode(data)
        if text:
            self._stream.write(text)
            self.at_line_start = text.endswith("\n")
        return len(data)

    def flush(self) -> None:
        self._stream.flush()  # an incomplete character stays in the decoder until its next bytes arrive


class Progress:
    """Prints one line when a step starts and one when it ends (with its duration); quiet mode prints nothing."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self._stream = stream or sys.stderr
        self._quiet = quiet
        self._target = _TextTarget(self._stream)
        self._raw = RedactingWriter(self._target, configured_secrets())  # type: ignore[arg-type]
        self._registered = registered_count()
        # Every warning given, in order: `devsy up --json` reports them in its outcome ("warnings").
        self.warnings: list[str] = []

    def warn(self, text: str) -> None:
        """Tell the user something devsy read but cannot do (once per call), and keep it for the outcome."""
        text = redact_text(text, self._secrets())
        self.warnings.append(text)
        self.info(f"warning: {text}")

    def info(self, text: str) -> None:
        if not self._quiet:
            self._raw.drain()  # a step's output ends before the line that says the step ended
            if not self._target.at_line_start:
                self._stream.write("\n")
                self._target.at_line_start = True
            print(f"devsy: {redact_text(text, self._secrets())}", file=self._stream, flush=True)

    def raw(self, data: bytes) -> None:
        """Pass through output of a step (a build, a lifecycle command) as it arrives, secrets masked."""
        if not self._quiet:
            self._secrets()
            self._raw.write(data)
            self._raw.flush()

    def _secrets(self) -> list[bytes]:
        """The current secrets; values registered since the last call are added to the live filter."""
        secrets = configured_secrets()
        if registered_count() != self._registered:
            self._registered = registered_count()
            self._raw.add_secrets(secrets)
        return secrets

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
