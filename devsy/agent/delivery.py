"""Putting the agent file into a workspace. One strategy interface; the default streams it over driver exec.

Stream delivery: one cheap exec checks whether the guest already has the file with the same checksum; otherwise the
file is streamed into `cat` in the guest, written to a temporary name, verified there (sha256sum, else python3),
made 0755 and renamed into place, so the final path only ever holds a complete, verified file. A failed attempt is
retried with backoff, each attempt with a fresh source; every source is closed exactly once, also on cancellation,
and the driver has joined its stdin copier before exec returns.

For tests only, delivery_fault.py can cut the first transfer short and trace each source's open and close
(`DEVSY_AGENT_DELIVERY_FAULT`, `DEVSY_AGENT_DELIVERY_TRACE`); both are inert unless set.
"""

from __future__ import annotations

import io
import threading
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

_EXIT_ABSENT, _EXIT_MISMATCH, _EXIT_NO_TOOL = 10, 11, 12
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


class _CloseOnce(io.RawIOBase):
    """Hands reads to one source and closes it exactly once, however many parties call close()."""

    def __init__(self, source: BinaryIO) -> None:
        super().__init__()
        self._source = source
        self._lock = threading.Lock()
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self._source.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        with self._lock:
            first, self._done = not self._done, True
        if first:
            self._source.close()
        super().close()


class StreamDelivery:
    """The default strategy: stream the file over exec (see the module docstring)."""

    def __init__(self, attempts: int = 4, backoff_s: float = 0.5, max_backoff_s: float = 4.0) -> None:
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s

    def deliver(self, driver: Driver, workspace_id: str, artifact: AgentArtifact, cancel: CancelToken,
                open_source: SourceFactory | None = None) -> Delivered:
        path = guest_agent_path(artifact.sha256)
        trace = DeliveryTrace.from_env()  # test-only (delivery_fault.py); a no-op unless configured
        if self._present(driver, workspace_id, path, artifact.sha256, cancel):
            trace.event("present", guest_path=path, sha256=artifact.sha256)
            return Delivered(path, artifact.sha256, transferred=False, attempts=0)
        opener = instrument(open_source or artifact.open, artifact.size, trace)
        delay, last = self.backoff_s, ""
        for attempt in range(1, self.attempts + 1):
            trace.event("attempt", attempt=attempt)
            try:
                self._transfer(driver, workspace_id, path, artifact.sha256, opener, cancel)
                trace.event("delivered", attempt=attempt, guest_path=path, sha256=artifact.sha256)
                return Delivered(path, artifact.sha256, transferred=True, attempts=attempt)
            except _Retry as exc:
                last = str(exc)
                trace.event("failed", attempt=attempt, error=last)
            # Backoff, not synchronization: a cancellation ends the wait at once.
            if attempt < self.attempts and cancel.wait(delay):
                break
            delay = min(delay * 2, self.max_backoff_s)
        if cancel.is_cancelled():
            raise Cancelled("delivering the agent was cancelled", hint="rerun the command")
        raise AgentError(f"delivering the agent into workspace {workspace_id} failed {self.attempts} times; "
                         f"last error: {last}",
                         hint=f"check that the workspace is running and {GUEST_DIR} is writable by root, then retry")

    def _present(self, driver: Driver, workspace_id: str, path: str, sha256: str, cancel: CancelToken) -> bool:
        code, err = _run(driver, workspace_id, ["/bin/sh", "-c", _CHECK, "devsy-check", path, sha256], None, cancel)
        if code == 0:
            return True
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
        try:
            code, err = _run(driver, workspace_id, argv, source, cancel)
        except DriverError as exc:
            if type(exc) is not DriverError:  # NotFound, BackendUnavailable, ...: retrying cannot help
                raise
            raise _Retry(exc.message) from exc
        finally:
            source.close()
        if cancel.is_cancelled():
            raise Cancelled("delivering the agent was cancelled", hint="rerun the command")
        if code == _EXIT_NO_TOOL:
            raise AgentUnsupported(f"cannot verify the agent in workspace {workspace_id}: {err}",
                                   hint="install coreutils (sha256sum) or python3 in the image")
        if code != 0:
            raise _Retry(f"the guest's install step exited {code}: {err or 'no message'}")


class _Retry(Exception):
    pass


def _run(driver: Driver, workspace_id: str, argv: list[str], stdin: BinaryIO | None,
         cancel: CancelToken) -> tuple[int, str]:
    out, err = io.BytesIO(), io.BytesIO()
    request = ExecRequest(argv=argv, stdin=stdin, owns_stdin=stdin is not None, stdout=out, stderr=err, user="0",
                          cancel=cancel)
    result = driver.exec(workspace_id, request)
    return result.exit_code, err.getvalue().decode("utf-8", "replace").strip()[-500:]
