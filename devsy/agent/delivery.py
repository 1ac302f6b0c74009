"""Putting the agent file into a workspace. One strategy interface; the default streams it over driver exec.

Stream delivery: one cheap exec checks whether the guest already has the file with the same checksum; otherwise the
file is streamed into `cat` in the guest, written to a temporary name, verified there (sha256sum, else python3),
made 0755 and renamed into place, so the final path only ever holds a complete, verified file. A failed attempt is
retried with backoff, each attempt with a fresh source; every source is closed exactly once, also on cancellation,
and the driver has joined its stdin copier before exec returns.

A transfer that makes no progress for `stall_timeout_s` (the exec's stdin accepts no bytes, or after the last byte
the guest does not finish) is cancelled and retried as a DeliveryStalled failure: a guest `cat` that reads nothing
would otherwise hold delivery forever. The driver takes the next chunk only once the previous one was written, so
a read from the source is the progress signal. `DEVSY_AGENT_DELIVERY_STALL_S` sets the default (tests shorten it).
An attempt that trickles on is bounded too (`attempt_timeout_s`), so delivery as a whole always ends.

For tests only, delivery_fault.py can cut the first transfer short and trace each source's open and close
(`DEVSY_AGENT_DELIVERY_FAULT`, `DEVSY_AGENT_DELIVERY_TRACE`); both are inert unless set.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from devsy.agent.artifact import AgentArtifact
from devsy.agent.delivery_fault import DeliveryTrace, instrument
from devsy.agent.errors import AgentError, AgentUnsupported
from devsy.driver.base import CancelToken, Driver, ExecRequest
from devsy.errors import Cancelled, DriverError

GUEST_DIR = "/usr/local/lib/devsy"
SourceFactory = Callable[[], BinaryIO]
STALL_ENV = "DEVSY_AGENT_DELIVERY_STALL_S"
DEFAULT_STALL_S = 60.0
DEFAULT_ATTEMPT_S = 600.0

_EXIT_ABSENT, _EXIT_MISMATCH, _EXIT_NO_TOOL = 10, 11, 12
_EXIT_CANNOT_RUN, _EXIT_NOT_FOUND = 126, 127  # what every driver's exec says when the program cannot be started
# Prints the sha256 of $1 with whatever the guest has; exit 12 when it has neither tool.
_SHA = r"""
sha() {
  if command -v sha256sum >/dev/null 2>&1; then set -- $(sha256sum "$1"); echo "$1"
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$1"
  else echo "the guest has neither sha256sum nor python3 to verify the agent" >&2; exit 12; fi
}
"""
_CHECK = _SHA + r"""
[ -f "$1" ] && [ -x "$1" ] || exit 10
got=$(sha "$1") || exit $?
[ "$got" = "$2" ] || exit 11
"""
_INSTALL = _SHA + r"""
umask 022
mkdir -p "$1" || exit 20
tmp="$1/.agent-$$.tmp"
trap 'rm -f "$tmp"' EXIT
cat > "$tmp" || exit 21
got=$(sha "$tmp") || exit $?
[ "$got" = "$3" ] || { echo "checksum mismatch: expected $3, got $got" >&2; exit 11; }
chmod 0755 "$tmp" && mv -f "$tmp" "$2" || exit 22
trap - EXIT
for old in "$1"/agent-*.pyz; do [ "$old" = "$2" ] || rm -f "$old"; done  # earlier versions; running ones keep theirs open
"""


def checked_then(path: str, sha256: str, script: str, *args: str) -> list[str]:
    """The exec argv that checks the agent at `path` as deliver() does, then, only when it is the one with `sha256`,
    runs the shell `script` with `args` as its $1...: a check and what follows it in one round trip. Only exit 0
    means anything (both passed): `script` may exit with the check's own codes."""
    return ["/bin/sh", "-c", _CHECK + "shift 2\n" + script, "devsy-check", path, sha256, *args]


def guest_agent_path(sha256: str) -> str:
    """Where an agent with this checksum lives in the guest (so an unchanged agent is never sent twice)."""
    return f"{GUEST_DIR}/agent-{sha256[:12]}.pyz"


@dataclass(frozen=True)
class Delivered:
    guest_path: str
    sha256: str
    transferred: bool  # False: the guest already had it
    attempts: int


class DeliveryStrategy(Protocol):
    def deliver(self, driver: Driver, workspace_id: str, artifact: AgentArtifact, cancel: CancelToken,
                open_source: SourceFactory | None = None) -> Delivered: ...


class DeliveryStalled(AgentError):
    """A transfer of the agent made no progress for the stall timeout; it was cancelled (and is retried)."""

    kind = "agent-delivery-stalled"


def stall_timeout_from_env() -> float:
    raw = os.environ.get(STALL_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_STALL_S
    except ValueError:
        value = -1.0
    if not value > 0:
        raise AgentError(f"{STALL_ENV} must be a positive number of seconds", hint=f"unset {STALL_ENV} or fix it")
    return value


class _CloseOnce(io.RawIOBase):
    """Hands reads to one source, closes it exactly once however many parties call close(), and notes when the
    reader last came for more (the previous chunk was accepted)."""

    def __init__(self, source: BinaryIO) -> None:
        super().__init__()
        self._source = source
        self._lock = threading.Lock()
        self._done = False
        self.progressed = time.monotonic()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        self.progressed = time.monotonic()
        data = self._source.read(len(buffer))
        buffer[: len(data)] = data
        self.progressed = time.monotonic()
        return len(data)

    def close(self) -> None:
        with self._lock:
            first, self._done = not self._done, True
        if first:
            self._source.close()
        super().close()


class StreamDelivery:
    """The default strategy: stream the file over exec (see the module docstring)."""

    def __init__(self, attempts: int = 4, backoff_s: float = 0.5, max_backoff_s: float = 4.0,
                 stall_timeout_s: float | None = None, attempt_timeout_s: float = DEFAULT_ATTEMPT_S) -> None:
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.stall_timeout_s = stall_timeout_s if stall_timeout_s is not None else stall_timeout_from_env()
        self.attempt_timeout_s = attempt_timeout_s

    def deliver(self, driver: Driver, workspace_id: str, artifact: AgentArtifact, cancel: CancelToken,
                open_source: SourceFactory | None = None) -> Delivered:
        path = guest_agent_path(artifact.sha256)
        trace = DeliveryTrace.from_env()  # test-only (delivery_fault.py); a no-op unless configured
        if self._present(driver, workspace_id, path, artifact.sha256, cancel):
            trace.event("present", guest_path=path, sha256=artifact.sha256)
            return Delivered(path, artifact.sha256, transferred=False, attempts=0)
        opener = instrument(open_source or artifact.open, artifact.size, trace)
        delay, last, stalled = self.backoff_s, "", False
        for attempt in range(1, self.attempts + 1):
            trace.event("attempt", attempt=attempt)
            try:
                self._transfer(driver, workspace_id, path, artifact.sha256, opener, cancel)
                trace.event("delivered", attempt=attempt, guest_path=path, sha256=artifact.sha256)
                return Delivered(path, artifact.sha256, transferred=True, attempts=attempt)
            except (_Retry, DeliveryStalled) as exc:
                last, stalled = str(exc), isinstance(exc, DeliveryStalled)
                trace.event("failed", attempt=attempt, error=last, stalled=stalled)
            # Backoff, not synchronization: a cancellation ends the wait at once.
            if attempt < self.attempts and cancel.wait(delay):
                break
            delay = min(delay * 2, self.max_backoff_s)
        if cancel.is_cancelled():
            raise Cancelled("delivering the agent was cancelled", hint="rerun the command")
        raise (DeliveryStalled if stalled else AgentError)(
                         f"delivering the agent into workspace {workspace_id} failed {self.attempts} times; "
                         f"last error: {last}",
                         hint=f"check that the workspace is running and {GUEST_DIR} is writable by root, then retry")

    def _present(self, driver: Driver, workspace_id: str, path: str, sha256: str, cancel: CancelToken) -> bool:
        code, err = _run(driver, workspace_id, ["/bin/sh", "-c", _CHECK, "devsy-check", path, sha256], None, cancel)
        if code == 0:
            return True
        if code in (_EXIT_CANNOT_RUN, _EXIT_NOT_FOUND) and not cancel.is_cancelled():
            # /bin/sh itself could not be run (the check runs no command that could exit so): a shell-less image.
            raise AgentUnsupported(f"workspace {workspace_id} has no usable /bin/sh (exit {code})",
                                   hint="devsy exec still runs commands that need no shell; add a shell for devsy ssh")
        if code == _EXIT_NO_TOOL:
            raise AgentUnsupported(f"cannot verify the agent in workspace {workspace_id}: {err}",
                                   hint="install coreutils (sha256sum) or python3 in the image")
        return False

    def _transfer(self, driver: Driver, workspace_id: str, path: str, sha256: str, opener: SourceFactory,
                  cancel: CancelToken) -> None:
        try:
            source = _CloseOnce(opener())
        except OSError as exc:
            raise AgentError(f"cannot open the agent file to deliver: {exc.strerror or exc}",
                             hint="rebuild it with `python -m devsy.agent.build` or fix DEVSY_AGENT_BINARY") from exc
        argv = ["/bin/sh", "-c", _INSTALL, "devsy-install", GUEST_DIR, path, sha256]
        watchdog = _StallWatchdog(source, self.stall_timeout_s, self.attempt_timeout_s, cancel)
        try:
            code, err = _run(driver, workspace_id, argv, source, watchdog.token)
        except DriverError as exc:
            if watchdog.stalled:
                raise watchdog.error() from exc
            if type(exc) is not DriverError:  # NotFound, BackendUnavailable, ...: retrying cannot help
                raise
            raise _Retry(exc.message) from exc
        finally:
            watchdog.close()
            source.close()
        if cancel.is_cancelled():
            raise Cancelled("delivering the agent was cancelled", hint="rerun the command")
        if watchdog.stalled and code != 0:  # a transfer that completed as the watchdog fired stands
            raise watchdog.error()
        if code == _EXIT_NO_TOOL:
            raise AgentUnsupported(f"cannot verify the agent in workspace {workspace_id}: {err}",
                                   hint="install coreutils (sha256sum) or python3 in the image")
        if code != 0:
            raise _Retry(f"the guest's install step exited {code}: {err or 'no message'}")


class _Retry(Exception):
    pass


class _StallWatchdog:
    """Cancels one transfer (through its own token, which the caller's cancellation also sets) once its source has
    not been read for `timeout` seconds, or once it has run for `limit` seconds however it progresses."""

    def __init__(self, source: _CloseOnce, timeout: float, limit: float, outer: CancelToken) -> None:
        self.token = CancelToken()
        self.stalled = False
        self.overran = False
        self._source, self._timeout, self._limit = source, timeout, limit
        self._end = time.monotonic() + limit
        self._done = threading.Event()
        self._unsubscribe = outer.on_cancel(self.token.cancel)
        self._thread = threading.Thread(target=self._watch, name="devsy-agent-stall", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while True:
            now = time.monotonic()
            idle = now - self._source.progressed
            if idle >= self._timeout or now >= self._end:
                self.stalled, self.overran = True, idle < self._timeout
                self.token.cancel()
                return
            if self._done.wait(min(self._timeout - idle, self._end - now)):  # close() ends this wait at once
                return

    def error(self) -> DeliveryStalled:
        why = (f"did not finish within {self._limit:g} s" if self.overran else f"made no progress for "
               f"{self._timeout:g} s (the guest accepted no input, or did not finish after the last byte)")
        return DeliveryStalled(f"the transfer {why} and was cancelled",
                               hint=f"check that the workspace responds (`devsy ssh`); {STALL_ENV} sets the timeout")

    def close(self) -> None:
        self._done.set()
        self._thread.join()
        self._unsubscribe()


def _run(driver: Driver, workspace_id: str, argv: list[str], stdin: BinaryIO | None,
         cancel: CancelToken) -> tuple[int, str]:
    out, err = io.BytesIO(), io.BytesIO()
    request = ExecRequest(argv=argv, stdin=stdin, owns_stdin=stdin is not None, stdout=out, stderr=err, user="0",
                          cancel=cancel)
    result = driver.exec(workspace_id, request)
    return result.exit_code, err.getvalue().decode("utf-8", "replace").strip()[-500:]
