"""Assertions of the conformance cases: a failed check names what was expected and what came back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from devsy.runtime.wire.constants import MAX_FRAME
from devsy.runtime.wire.status import DetailError, RuntimeErrorInfo, from_error


class CaseFailed(AssertionError):
    pass


class CaseSkipped(Exception):
    """The provider does not offer what the case needs (it says so in Info)."""


class CaseBlocked(Exception):
    """The case needs a running instance, and the provider reported that it cannot boot one on this host (a
    RuntimeError with detail kind `boot-failed`, e.g. a microVM where KVM cannot run guests). Not a pass, not a
    provider fault: the case must run where instances can boot. The message carries the provider's evidence."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CaseFailed(message)


def expect_error(code: str, call: Callable[[], Any], what: str) -> RuntimeErrorInfo:
    """`call` must fail with a status carrying exactly one RuntimeError of `code`."""
    try:
        call()
    except grpc.RpcError as exc:
        try:
            info = from_error(exc)
        except DetailError as detail_exc:
            raise CaseFailed(f"{what}: malformed error status ({detail_exc})") from None
        if info is None:
            raise CaseFailed(f"{what}: expected {code} with a RuntimeError detail, got "
                             f"{exc.code().name} without detail ({exc.details()!r})") from None  # type: ignore
        check(info.code == code, f"{what}: expected {code}, got {info.code} ({info.message!r})")
        return info
    raise CaseFailed(f"{what}: expected {code}, but the call succeeded")


def expect_status(status: grpc.StatusCode, call: Callable[[], Any], what: str) -> None:
    """`call` must fail with gRPC status `status` (cancellation and deadlines carry no RuntimeError)."""
    try:
        call()
    except grpc.RpcError as exc:
        check(exc.code() is status, f"{what}: expected {status.name}, got {exc.code().name}")  # type: ignore
        return
    raise CaseFailed(f"{what}: expected {status.name}, but the call succeeded")


@dataclass
class StreamRecord:
    """Everything an Exec stream delivered, with every frame checked."""

    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    exit_code: int | None = None
    signal: str = ""
    frames: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, message: Any) -> None:
        self.frames += 1
        kind = message.WhichOneof("payload")
        if self.exit_code is not None:
            self.problems.append(f"a {kind} frame after the exit frame")
            return
        if kind == "exit":
            self.exit_code, self.signal = message.exit.exit_code, message.exit.signal
            return
        if kind not in ("stdout", "stderr"):
            self.problems.append("a frame without payload")
            return
        data = getattr(message, kind).data
        if not 1 <= len(data) <= MAX_FRAME:
            self.problems.append(f"a {kind} frame of {len(data)} bytes")
        (self.stdout if kind == "stdout" else self.stderr).extend(data)

    def require_clean(self, what: str) -> None:
        check(not self.problems, f"{what}: protocol violations: {'; '.join(self.problems[:5])}")
        check(self.exit_code is not None, f"{what}: the stream ended without an exit frame")

    def require(self, what: str, *, stdout: bytes | None = b"", stderr: bytes | None = b"", exit_code: int = 0,
                signal: str = "") -> None:
        self.require_clean(what)
        if stdout is not None:
            check(bytes(self.stdout) == stdout, f"{what}: stdout {_show(self.stdout)} != expected {_show(stdout)}")
        if stderr is not None:
            check(bytes(self.stderr) == stderr, f"{what}: stderr {_show(self.stderr)} != expected {_show(stderr)}")
        check((self.exit_code, self.signal) == (exit_code, signal),
              f"{what}: exit ({self.exit_code}, {self.signal!r}) != expected ({exit_code}, {signal!r})")


def _show(data: bytes | bytearray) -> str:
    data = bytes(data)
    return repr(data) if len(data) <= 80 else f"<{len(data)} bytes starting {data[:40]!r}>"
