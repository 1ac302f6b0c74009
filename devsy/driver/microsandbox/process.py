"""Stopping an msb child and everything in its process group: TERM first, KILL after a grace period, always reaped.

Every msb child starts in its own session (so a terminal's Ctrl-C reaches devsy, which then decides), which makes
its pid also its process-group id. A VMM that msb detaches into a session of its own is deliberately out of reach:
removing the sandbox (`msb rm -f`) is what ends it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading

TERM_GRACE_S = 5.0
KILL_WAIT_S = 10.0


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send `sig` to the child's group, unless the child has already been reaped (its pid could be reused)."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop_group(proc: subprocess.Popen, grace: float = TERM_GRACE_S) -> None:
    """TERM the group, KILL it if the child outlives `grace`, and reap the child."""
    signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(grace)
        return
    except subprocess.TimeoutExpired:
        pass
    signal_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(KILL_WAIT_S)
    signal_group(proc, signal.SIGKILL)  # the child is gone; stragglers in its group are not left running


class Terminator:
    """Stops a child from any thread without blocking that thread (a CancelToken callback may run in a signal
    handler): TERM now, KILL when the grace period ends unless the child exited first."""

    def __init__(self, proc: subprocess.Popen, grace: float = TERM_GRACE_S) -> None:
        self._proc = proc
        self._grace = grace
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.fired = False

    def __call__(self) -> None:
        with self._lock:
            if self.fired:
                return
            self.fired = True
            signal_group(self._proc, signal.SIGTERM)
            self._timer = threading.Timer(self._grace, signal_group, (self._proc, signal.SIGKILL))
            self._timer.daemon = True
            self._timer.start()

    def disarm(self) -> None:
        """The child has been reaped: the pending KILL must not hit a reused pid."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
