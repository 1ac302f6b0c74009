"""Assertions of the conformance cases: a failed check names what was expected and what came back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import grpc

from devsy.runtime.wire.constants import MAX_FRAME
from devsy.runtime.wire.deadline import CallDeadline
from devsy.runtime.wire.status import GRPC_CODE, DetailError, DetailPolicy, RuntimeErrorInfo, from_error


class CaseFailed(AssertionError):
    pass


class CaseSkipped(Exception):
    """The provider does not offer what the case needs (it says so in Info)."""


class CaseBlocked(Exception):
    """The case needs a running instance, and the provider reported that it cannot boot one on this host (a
    RuntimeError with detail kind `boot-failed`, e.g. a microVM where KVM cannot run guests). Not a pass, not a
    provider fault: the case must run where instances can boot. The message carries the provider's evidence."""


class CaseNotOffered(Exception):
    """The protocol's checks passed, but the case also holds devsy's own providers to devsy policy (stricter than
    the protocol, e.g. exactly one RuntimeError detail on every error) and this provider does not offer that. The
    message lists each waived check: never a pass, never a fault."""


@dataclass
class _Policy:
    applies: bool
    waived: list[str] = field(default_factory=list)


_POLICY: ContextVar[_Policy] = ContextVar("conformance_policy", default=_Policy(applies=True))


@contextmanager
def policy_scope(applies: bool) -> Iterator[list[str]]:
    """Run one case with devsy policy checked (`applies`) or waived; yields the list of waived checks."""
    scope = _Policy(applies)
    token = _POLICY.set(scope)
    try:
        yield scope.waived
    finally:
        _POLICY.reset(token)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CaseFailed(message)


def policy(condition: bool, message: str) -> None:
    """A devsy policy check: a failure for devsy's own providers, a waived check (reported) for any other."""
    scope = _POLICY.get()
    if scope.applies:
        check(condition, message)
    elif not condition:
        scope.waived.append(message)


def expect_error(code: str, call: Callable[[], Any], what: str, *, detail_required: bool = False
                 ) -> RuntimeErrorInfo | None:
    """`call` must fail with the gRPC status of RuntimeError `code` (the protocol). Its RuntimeError detail, when
    present, must name `code`; exactly one is devsy policy, or the protocol where `detail_required` (as the Go SDK's
    RequireRuntimeError). Returns the detail (None when a waived one is missing)."""
    try:
        call()
    except grpc.RpcError as exc:
        status = exc.code()  # type: ignore[attr-defined]
        check(status is GRPC_CODE[code], f"{what}: expected {code} (gRPC {GRPC_CODE[code].name}), got "
                                          f"{status.name} ({exc.details()!r})")  # type: ignore[attr-defined]
        # Exactly one detail and nothing else is devsy policy; the protocol tolerates details of other types.
        reading = DetailPolicy.DEVSY if _POLICY.get().applies else DetailPolicy.PROTOCOL
        try:
            info = from_error(exc, reading)
        except DetailError as detail_exc:
            raise CaseFailed(f"{what}: malformed error status ({detail_exc})") from None
        if info is None:
            message = f"{what}: {code} without a RuntimeError detail"
            (check if detail_required else policy)(False, message)
            return None
        check(info.code == code, f"{what}: expected {code}, got {info.code} ({info.message!r})")
        return info
    raise CaseFailed(f"{what}: expected {code}, but the call succeeded")


def expect_status(status: grpc.StatusCode, call: Callable[[], Any], what: str,
                  deadline: CallDeadline | None = None) -> None:
    """`call` must fail with gRPC status `status` (cancellation and deadlines carry no RuntimeError); `deadline`,
    for a call made with one, reads a server's cancel past it as the deadline it is (wire.deadline)."""
    try:
        call()
    except grpc.RpcError as exc:
        code = deadline.code(exc) if deadline is not None else exc.code()  # type: ignore[attr-defined]
        check(code is status, f"{what}: expected {status.name}, got {code.name}")
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
