"""A terminal's job control, seen from the job: whether using the terminal now would get our job stopped, and
stopping it ourselves instead, so that a `kill %N` of the stopped job ends it.

A background job that reads its controlling terminal is stopped by the kernel (SIGTTIN), and so is one that changes
the terminal's settings (SIGTTOU: a raw mode). When the job is continued, the kernel restarts that read or that
tcsetattr on its own, and a job continued still in the background (`kill %N` sends SIGTERM, then SIGCONT) is stopped
again before it can act on the signal: `kill %N` never ends it. So devsy does not make those calls from the
background where the kernel would stop the job: it stops the job itself (the same signal, to its process group), and
once continued it waits without touching the terminal until it has the foreground, or until it is told to give up
(cancelled). A SIGTERM that came with the SIGCONT then ends the command (termination.py hears it from whichever
thread took it). A job continued in the background (`bg`) waits for the foreground the same way rather than stopping
again; the shell shows it as running meanwhile.

The kernel checks and stops in one step; this cannot. A `fg` landing between the last check (the terminal's owner,
done last for that reason) and the stop leaves the job stopped in the foreground: the shell says so, and `fg` again
continues it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

# How often a job continued in the background looks whether it has the terminal yet (no event says so).
FOREGROUND_POLL_S = 0.2
# How far up the process tree the orphaned-group check goes (a job's own chain of wrappers is short).
_ANCESTORS_LOOKED_AT = 16

# What waits for a cancellation: called with a timeout in seconds, it returns whether the caller was cancelled
# meanwhile (True at once if it already was).
WaitCancelled = Callable[[float], bool]


def would_stop(fd: int, signum: signal.Signals) -> bool:
    """Whether the kernel would stop our job with `signum` (SIGTTIN: reading; SIGTTOU: changing the terminal's
    settings) if we used terminal `fd` now: it is our controlling terminal, another process group has it, `signum` is
    neither ignored nor blocked, and the group is not orphaned. Otherwise the kernel does not stop the job (with the
    signal ignored or blocked, a read fails with EIO and a change of settings is made; in an orphaned group both fail
    with EIO), and where that is not clear-cut, the call itself lets the kernel decide."""
    if signal.getsignal(signum) is signal.SIG_IGN or signum in signal.pthread_sigmask(signal.SIG_BLOCK, []):
        return False
    try:
        if os.tcgetpgrp(fd) == os.getpgrp():
            return False
    except OSError:
        return False  # not our controlling terminal: no job control applies to it
    if not _run_by_a_shell_outside_the_group():
        return False
    try:
        return os.tcgetpgrp(fd) != os.getpgrp()
    except OSError:
        return False


class TerminalLost(Exception):
    """The job waited for the terminal's foreground, and the terminal stopped being one it can get: the shell that
    ran the job exited (the group is orphaned) or the terminal hung up (it is no longer our controlling terminal)."""


def stop_until_foreground(fd: int, signum: signal.Signals, wait_cancelled: WaitCancelled) -> bool:
    """Stop our job as the kernel would (`signum` to our process group); once continued, wait without touching the
    terminal until the job has it (True) or `wait_cancelled` says we were cancelled (False). Raises TerminalLost
    when the wait ends for neither."""
    os.killpg(os.getpgrp(), signum)  # returns once the job is continued
    while would_stop(fd, signum):
        if wait_cancelled(FOREGROUND_POLL_S):
            return False
    try:
        if os.tcgetpgrp(fd) == os.getpgrp():
            return True
    except OSError:
        pass
    raise TerminalLost(f"the terminal is no longer this job's (fd {fd})")


def _run_by_a_shell_outside_the_group() -> bool:
    """Whether the nearest ancestor outside our process group is in our session: the shell that runs the job (our
    parent, or a wrapper script's). Then the group is not orphaned."""
    group, session = os.getpgrp(), os.getsid(0)
    pid = os.getpid()
    for _ in range(_ANCESTORS_LOOKED_AT):
        parent = _parent_of(pid)
        if parent is None or parent <= 1:
            return False
        try:
            if os.getpgid(parent) != group:
                return os.getsid(parent) == session
        except OSError:
            return False  # gone meanwhile
        pid = parent
    return False


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after its last ')'
            return int(stat.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
