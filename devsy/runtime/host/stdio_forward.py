"""The host's side of go-plugin's `plugin.GRPCStdio/StreamStdio`: what a provider writes to its stdout/stderr after
the handshake (a Go provider's os.Stdout/os.Stderr, a devsy SDK provider's sys.stdout) arrives through that stream.

go-plugin's server blocks the writer until a host drains the stream, so the host subscribes right after the
handshake and drains it on a thread for the provider's whole life, whatever the log keeps. The lines go to the
`devsy.provider` logger at INFO (the SSH master's log keeps them; the CLI shows only warnings, so a `devsy exec`'s
own stderr stays the guest's bytes), masked with the provider's secrets and bounded: each line is cut at
LINE_MAX_BYTES, a token bucket allows BURST_LINES then RATE_LINES_PER_S, and at most MAX_LOGGED_LINES are logged per
provider process, so a chatty provider can fill neither memory nor disk. A provider that does not serve the stream
(Unimplemented) is fine: there is nothing to drain.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import grpc
from google.protobuf import empty_pb2

from devsy.redaction import Redactor, configured_secrets
from devsy.runtime.goplugin import grpc_stdio_pb2, grpc_stdio_pb2_grpc

log = logging.getLogger("devsy.provider")

LINE_MAX_BYTES = 2048
BURST_LINES = 200
RATE_LINES_PER_S = 20.0
MAX_LOGGED_LINES = 2000
# How the stream ends when the provider or the host goes away: not an error worth a line.
_ENDED = (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
_CHANNELS = {grpc_stdio_pb2.StdioData.STDOUT: "stdout", grpc_stdio_pb2.StdioData.STDERR: "stderr"}


class _Lines:
    """Splits one channel's bytes into lines; keeps at most `keep` bytes of a line (so memory stays bounded) and
    counts what it cut off."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._partial = bytearray()
        self._cut = 0

    def feed(self, data: bytes) -> list[tuple[bytes, int]]:
        """The lines `data` completes, each with how many of its bytes were cut off."""
        *complete, rest = data.split(b"\n")
        lines = []
        for piece in complete:
            self._add(piece)
            lines.append((bytes(self._partial), self._cut))
            self._partial.clear()
            self._cut = 0
        self._add(rest)
        return lines

    def finish(self) -> list[tuple[bytes, int]]:
        line = (bytes(self._partial), self._cut) if self._partial or self._cut else None
        self._partial.clear()
        self._cut = 0
        return [line] if line else []

    def _add(self, piece: bytes) -> None:
        room = self._keep - len(self._partial)
        self._partial += piece[:max(room, 0)]
        self._cut += max(len(piece) - max(room, 0), 0)


@dataclass
class _Budget:
    """A token bucket (BURST_LINES, then RATE_LINES_PER_S) under a total of MAX_LOGGED_LINES."""

    tokens: float = BURST_LINES
    stamp: float = field(default_factory=time.monotonic)
    logged: int = 0

    def take(self) -> bool:
        if self.logged >= MAX_LOGGED_LINES:
            return False
        now = time.monotonic()
        self.tokens = min(BURST_LINES, self.tokens + (now - self.stamp) * RATE_LINES_PER_S)
        self.stamp = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        self.logged += 1
        return True


def _printable(text: str) -> str:
    # A provider's bytes must not steer the terminal or the log's layout (escape sequences, carriage returns).
    return text if text.isprintable() else "".join(c if c.isprintable() or c == "\t" else "\ufffd" for c in text)


class StdioForwarder:
    """Subscribes to the provider's stdio stream and drains it on a daemon thread until it ends or `close()`."""

    def __init__(self, channel: grpc.Channel, provider: str, secrets: list[str]) -> None:
        """`secrets`: the provider's env values and args; devsy's configured secrets are masked too."""
        self.provider = provider
        masked = configured_secrets(secrets)
        self._redact = Redactor(masked)
        # Enough of a cut line is kept that a secret starting before the cut is masked whole before cutting.
        longest = max((len(secret) for secret in masked), default=0)
        self._lines = {name: _Lines(LINE_MAX_BYTES + longest) for name in _CHANNELS.values()}
        self._budget = _Budget()
        self.received_bytes = 0
        self.lines = 0
        self.dropped = 0
        self.done = threading.Event()
        self._call = grpc_stdio_pb2_grpc.GRPCStdioStub(channel).StreamStdio(empty_pb2.Empty())
        self._thread = threading.Thread(target=self._drain, daemon=True, name=f"provider-stdio-{provider}")
        self._thread.start()

    def _drain(self) -> None:
        try:
            for message in self._call:
                name = _CHANNELS.get(message.channel)
                if name is None:
                    continue  # go-plugin drops an unknown channel too
                self.received_bytes += len(message.data)
                for line, cut in self._lines[name].feed(message.data):
                    self._emit(name, line, cut)
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            if code is grpc.StatusCode.UNIMPLEMENTED:
                log.debug("provider %s does not serve go-plugin's stdio stream", self.provider)
            elif code not in _ENDED:
                log.warning("provider %s: its stdio stream failed (%s); later output is not logged", self.provider,
                            code.name)
        finally:
            for name, lines in self._lines.items():
                for line, cut in lines.finish():
                    self._emit(name, line, cut)
            if self.dropped:
                log.info("provider %s: %d of its %d stdio lines were not logged (devsy logs at most %d per provider, "
                         "%g per second after a burst of %d)", self.provider, self.dropped, self.lines,
                         MAX_LOGGED_LINES, RATE_LINES_PER_S, BURST_LINES)
            self.done.set()

    def _emit(self, channel: str, line: bytes, cut: int) -> None:
        self.lines += 1
        if not self._budget.take():
            self.dropped += 1
            return
        text = self._redact(line.decode("utf-8", "replace"))
        if len(text) > LINE_MAX_BYTES or cut:
            text = f"{text[:LINE_MAX_BYTES]}... (cut: the line had {len(line) + cut} bytes)"
        log.info("provider %s %s: %s", self.provider, channel, _printable(text))

    def close(self, timeout: float = 5.0) -> None:
        """Stop draining (the provider is going away) and wait, bounded, for the thread to end."""
        self._call.cancel()
        self._thread.join(timeout)
