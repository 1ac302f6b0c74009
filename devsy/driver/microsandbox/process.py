"""Stopping an msb child and everything in its process group: TERM first, KILL after a grace period, always reaped.

Every msb child starts in its own session (so a terminal's Ctrl-C reaches devsy, which then decides), which makes
its pid also its process-group id. A VMM that msb detaches into a session of its own is deliberately out of reach:
removing the sandbox (`msb rm -f`) is what ends it. The signalling itself (and its pid-reuse guard) is
devsy.process_tree's.
"""

from __future__ import annotations

import signal
import subprocess
import threading

from devsy import process_tree

TERM_GRACE_S = 5.0
KILL_WAIT_S = 10.0


def stop_group(proc: subprocess.Popen, grace: float = TERM_GRACE_S) -> process_tree.Stopped:
    """TERM the group, KILL it if the child outlives `grace`, and reap the child."""
    return process_tree.stop_child(proc, group=True, grace=grace, kill_wait=KILL_WAIT_S)


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
            process_tree.signal_child(self._proc, signal.SIGTERM)
            self._timer = threading.Timer(self._grace, process_tree.signal_child, (self._proc, signal.SIGKILL))
            self._timer.daemon = True
            self._timer.start()

    def disarm(self) -> None:
        """The child has been reaped: the pending KILL is moot (and signal_child would refuse a reaped child)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
