"""A devsy command the case keeps running while it talks to it: reads its output as it arrives, writes its stdin,
signals it. Used where `DevsyHandle.run` (run to completion) cannot show the behaviour: a stall, a cancellation.

The command runs in its own process group, bounded by the case deadline: leaving the `with` block kills the group if
it is still there, and the command is recorded in the case's command log like every other devsy call.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Self

from devsy import process_tree
from harness.commands import KILL_GRACE, CompletedCommand
from harness.devsy_handle import DevsyHandle


class StreamStalled(AssertionError):
    """Output the case waited for did not arrive in time; the message shows what did."""


@dataclass
class _Captured:
    """One output pipe, read by its own thread into a buffer (so neither pipe can fill up and block the command)."""

    data: bytearray = field(default_factory=bytearray)
    ended: bool = False
    changed: threading.Condition = field(default_factory=threading.Condition)

    def pump(self, pipe: IO[bytes]) -> None:
        while True:
            chunk = os.read(pipe.fileno(), 1 << 20)
            with self.changed:
                if not chunk:
                    self.ended = True
                    self.changed.notify_all()
                    return
                self.data += chunk
                self.changed.notify_all()

    def wait_for(self, size: int, timeout: float) -> bytes:
        """The first `size` bytes, once they have arrived (fewer at end of output or timeout)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.data) < size and not self.ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)
            return bytes(self.data[:size])

    def wait_line(self, timeout: float) -> bytes:
        """The first line (with its newline), once complete; what arrived so far at end of output or timeout."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while b"\n" not in self.data and not self.ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)
            end = self.data.find(b"\n")
            return bytes(self.data[: end + 1] if end >= 0 else self.data)


class LiveCommand:
    """`devsy ARGS...` started now; use as a context manager."""

    def __init__(self, devsy: DevsyHandle, *args: str, stdin: int | None = subprocess.DEVNULL,
                 env: dict[str, str] | None = None) -> None:
        self._devsy = devsy
        self.argv = [*devsy.cli, *args]
        self._env_note = f"env: {', '.join(sorted(env))}=..." if env else ""
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=devsy.env(env), start_new_session=True)
        self.stdout, self.stderr = _Captured(), _Captured()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [threading.Thread(target=captured.pump, args=(pipe,), daemon=True, name="live-command")
                         for captured, pipe in ((self.stdout, self.proc.stdout), (self.stderr, self.proc.stderr))]
        for reader in self._readers:
            reader.start()
        self._recorded = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        killed = self.proc.poll() is None
        if killed:
            process_tree.stop_child(self.proc, grace=KILL_GRACE, kill_wait=KILL_GRACE)
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        self._record(killed=killed)

    def timeout(self, what: str, cap: float) -> float:
        """At most `cap` seconds, and never past the case deadline."""
        return self._devsy.deadline.timeout(what, cap)

    def read_stdout(self, size: int, cap: float = 60.0) -> bytes:
        """Exactly the first `size` bytes of stdout; raises StreamStalled when they do not arrive within `cap`."""
        data = self.stdout.wait_for(size, self.timeout("reading the command's output", cap))
        if len(data) < size:
            raise StreamStalled(f"{self.describe()}: waited for {size} bytes of stdout, got {data!r}; "
                                f"stderr: {bytes(self.stderr.data)[-2000:]!r}")
        return data

    def read_line(self, cap: float = 60.0) -> bytes:
        """The first stdout line; raises StreamStalled when it is not complete within `cap`."""
        line = self.stdout.wait_line(self.timeout("reading the command's first line", cap))
        if not line.endswith(b"\n"):
            raise StreamStalled(f"{self.describe()}: no complete first line within {cap:g}s, got {line!r}; "
                                f"stderr: {bytes(self.stderr.data)[-2000:]!r}")
        return line

    def write_stdin(self, data: bytes, close: bool = False) -> None:
        assert self.proc.stdin is not None, "started without stdin=subprocess.PIPE"
        self.proc.stdin.write(data)
        self.proc.stdin.flush()
        if close:
            self.proc.stdin.close()

    def send_signal(self, signum: int, *, group: bool = False) -> float:
        """Signal the devsy process (or its whole process group, as a terminal's Ctrl-C does); returns the time."""
        process_tree.signal_child(self.proc, signum, group=group)
        return time.monotonic()

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if the command is still running after `timeout` seconds."""
        try:
            return self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None

    def finish(self, cap: float = 120.0) -> CompletedCommand:
        """Wait for the command to end by itself (bounded) and return everything it wrote."""
        code = self.wait(self.timeout("waiting for the command to end", cap))
        if code is None:
            raise StreamStalled(f"{self.describe()}: still running after {cap:g}s; stdout tail "
                                f"{bytes(self.stdout.data)[-500:]!r}, stderr tail {bytes(self.stderr.data)[-2000:]!r}")
        for reader in self._readers:
            reader.join(10)
        return self._completed(code)

    def describe(self) -> str:
        return f"$ {' '.join(self.argv)}"

    def _completed(self, code: int | None) -> CompletedCommand:
        return CompletedCommand(argv=self.argv, exit_code=code, stdout=bytes(self.stdout.data),
                                stderr=bytes(self.stderr.data), duration=time.monotonic() - self.started,
                                timed_out=False)

    def _record(self, killed: bool) -> None:
        """Add the command to the case's log once (its output as captured, and whether the case killed it)."""
        if self._recorded:
            return
        self._recorded = True
        for reader in self._readers:
            reader.join(5)
        note = "; ".join(part for part in (self._env_note, "killed by the case" if killed else "") if part)
        self._devsy.log.add(self._completed(self.proc.returncode).record(note=note))
