"""Stopping a process or its process group: TERM, a bounded grace, KILL; never a pid that names someone else now.

Every stop in devsy goes through here. A pid is signalled only through a `Pinned` handle: a pidfd (pidfd_send_signal
cannot reach another process, whatever the number names later), opened and then proven to name the intended
process (our unreaped child, a recorded start time, or a caller's own proof such as a still-open socket). A process
group is signalled by its number (killpg has no pidfd form), so only while that number is provably still the
group's: its leader has not exited, or the leader is our own child left unreaped (a zombie keeps its number). A
group whose leader is gone is reached by `kill_and_reap_group`, which only signals while a member is our child.

Standard library only: the SSH client, the runtime supervisor and the exec guard's bare interpreter import it.
"""

from __future__ import annotations

import contextlib
import enum
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# A KILLed process dies at once unless it is stuck in the kernel (D state); this bounds the wait for that.
KILL_WAIT_S = 10.0


class Outcome(enum.Enum):
    """How a stop ended, for one process."""

    GONE = "gone"  # not running (or no longer the intended process) when asked: nothing was signalled
    EXITED = "exited"  # ended within the grace after TERM
    KILLED = "killed"  # outlived the grace (or got no grace) and ended after KILL
    SURVIVED = "survived"  # still there after KILL and its bounded wait: stuck in the kernel


@dataclass(frozen=True)
class Stopped:
    """The result of stopping one process (and, for a group stop, the group it leads)."""

    pid: int
    outcome: Outcome

    @property
    def ended(self) -> bool:
        return self.outcome is not Outcome.SURVIVED


def start_time(pid: int) -> int | None:
    """/proc/PID/stat field 22 (start time in clock ticks since boot): with the pid, a process's identity."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


class Pinned:
    """A process held by a pidfd that was shown to name the intended process after it was opened."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self._fd = pidfd

    def __enter__(self) -> Pinned:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def exited(self) -> bool:
        """Whether the process has exited (a zombie counts: it runs no more)."""
        return self.wait(0)

    def wait(self, timeout: float) -> bool:
        """True once the process has exited (its pidfd turns readable), False after `timeout` seconds."""
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        return bool(poller.poll(max(0.0, timeout) * 1000))

    def signal(self, sig: int, *, group: bool = False) -> bool:
        """Send `sig` to the process, or to the group it leads; False when it could not be reached (gone)."""
        if group:
            if not self._group_number_held():
                return False
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                return False
            return True
        try:
            signal.pidfd_send_signal(self._fd, sig)
        except ProcessLookupError:
            return False
        return True

    def _group_number_held(self) -> bool:
        """The group's number is still the leader's: it runs, or it is our child and nobody reaped it yet."""
        if not self.exited():
            return True
        try:  # WNOWAIT: look without reaping; the zombie keeps the number for the caller's own reap
            return os.waitid(os.P_PIDFD, self._fd, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return False  # not our child (or already reaped): its number may name another group by now


def pin(pid: int, same: Callable[[], bool]) -> Pinned | None:
    """Pin `pid` if `same()`, asked after the pidfd is open, confirms it is still the intended process."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    if not same():
        os.close(pidfd)
        return None
    return Pinned(pid, pidfd)


def pin_started(pid: int, started: int | None) -> Pinned | None:
    """Pin `pid` if it is still the process that started at `started` (see start_time)."""
    if started is None:
        return None
    return pin(pid, lambda: start_time(pid) == started)


def pin_child(proc: subprocess.Popen) -> Pinned | None:
    """Pin our child `proc` unless it was already reaped (then its pid may be another process's)."""
    if proc.returncode is not None:
        return None
    return pin(proc.pid, lambda: proc.returncode is None)


def signal_child(proc: subprocess.Popen, sig: int, *, group: bool = True) -> bool:
    """Send `sig` to our child (its group by default) without waiting; safe from a signal handler or a timer."""
    pinned = pin_child(proc)
    if pinned is None:
        return False
    with pinned:
        return pinned.signal(sig, group=group)


def stop(targets: Sequence[Pinned], *, group: bool, grace: float, kill_wait: float = KILL_WAIT_S, term: bool = True,
         wait: Callable[[list[Pinned], float], list[Pinned]] | None = None) -> list[Stopped]:
    """TERM every target (each one's group if `group`), wait up to `grace` for them all, KILL those left and wait up
    to `kill_wait`. A `grace` of 0 skips TERM: KILL at once; `term=False` makes the grace a wait for targets already
    told to end (or ending by themselves). `wait(targets, timeout)` returns those still running after it (default:
    watch their pidfds)."""
    wait = wait or _wait_all
    outcomes: dict[int, Outcome] = {}
    termed = []
    for target in targets:
        if grace > 0 and not target.signal(signal.SIGTERM if term else 0, group=group):
            outcomes[target.pid] = Outcome.GONE
        else:
            termed.append(target)
    deadline = time.monotonic() + grace
    left = wait(termed, grace) if grace > 0 else termed
    if group:  # a leader that ended within the grace may leave members that ignore TERM: they are KILLed too
        left += _groups_left(termed, left, deadline)
    for target in termed:
        if target not in left:
            outcomes[target.pid] = Outcome.EXITED
    killed = [target for target in left if target.signal(signal.SIGKILL, group=group) or not target.exited()]
    for target in left:
        if target not in killed:
            outcomes[target.pid] = Outcome.GONE if grace == 0 else Outcome.EXITED
    survivors = wait(killed, kill_wait) if killed else []
    for target in killed:
        outcomes[target.pid] = Outcome.SURVIVED if target in survivors else Outcome.KILLED
    return [Stopped(target.pid, outcomes[target.pid]) for target in targets]


def stop_pid(pid: int, start: int | None, *, group: bool, grace: float, kill_wait: float = KILL_WAIT_S) -> Stopped:
    """Stop the process `pid` that started at `start` (or the group it leads); GONE if that process is gone."""
    pinned = pin_started(pid, start)
    if pinned is None:
        return Stopped(pid, Outcome.GONE)
    with pinned:
        return stop([pinned], group=group, grace=grace, kill_wait=kill_wait)[0]


def wait_child(proc: subprocess.Popen, timeout: float) -> int | None:
    """Our child's exit code once it exits within `timeout` seconds (reaped), else None.

    Woken by the child's pidfd the moment it exits. Popen.wait(timeout) polls instead, with sleeps that double up to
    50 ms: a child that exits after 35 ms is noticed at 63 ms, which every provider shutdown, released exec guard and
    `msb exec` paid."""
    pinned = pin_child(proc)
    if pinned is None:
        # Reaped: by us (returncode is set, this returns at once) or by another thread that has yet to set it.
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
    with pinned:
        if not pinned.wait(timeout):
            return None
    return proc.wait()  # it has exited: reaped at once, or once another thread reaping it is done


def stop_child(proc: subprocess.Popen, *, group: bool = True, grace: float, kill_wait: float = KILL_WAIT_S,
               term: bool = True) -> Stopped:
    """Stop our child `proc` (its group by default; `term` as in stop) and reap it once it has exited."""
    pinned = pin_child(proc)
    if pinned is None:
        return Stopped(proc.pid, Outcome.GONE)
    with pinned:
        result = stop([pinned], group=group, grace=grace, kill_wait=kill_wait, term=term)[0]
    if result.ended:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(kill_wait)  # it has exited: this returns at once (another thread may reap it first)
    return result


@dataclass(frozen=True)
class Collected(Stopped):
    """A stopped child's result with everything it wrote to its stdout and stderr pipes."""

    stdout: bytes = b""
    stderr: bytes = b""


def stop_child_collecting(proc: subprocess.Popen, *, group: bool = True, grace: float,
                          kill_wait: float = KILL_WAIT_S) -> Collected:
    """stop_child for a child whose output pipes we hold: every wait reads them (communicate), so a child blocked on
    a full pipe can still exit within its grace; returns what it wrote (empty if it could not be read to the end)."""
    output = [b"", b""]

    def communicated(targets: list[Pinned], timeout: float) -> list[Pinned]:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            return targets
        output[:] = [out or b"", err or b""]
        return []

    pinned = pin_child(proc)
    if pinned is None:
        communicated([], kill_wait)  # already reaped: what it left in the pipes
        return Collected(proc.pid, Outcome.GONE, *output)
    with pinned:
        result = stop([pinned], group=group, grace=grace, kill_wait=kill_wait, wait=communicated)[0]
    if result.outcome is Outcome.GONE:
        communicated([], kill_wait)
    return Collected(result.pid, result.outcome, *output)


# How long a frozen tree's members may take to show as stopped: SIGSTOP takes effect when each returns to user space.
FREEZE_WAIT_S = 2.0


def kill_tree(root: Pinned, *, kill_wait: float = KILL_WAIT_S) -> list[Stopped]:
    """KILL `root` and all its descendants, found by their parent links in /proc: for processes that are not our
    children and lead no group of their own (a container's exec, seen from the host).

    Each member is frozen (SIGSTOP) as it is found and the search repeats once all of them show as stopped, so a
    fork under way is seen rather than missed; a member's identity is proven by its parent being a frozen member (a
    stopped parent cannot end, so its child's pid names that child). A descendant that was already reparented
    elsewhere (a daemon that double-forked) is not in the tree and is left alone. A member we may not signal
    (another user's) is left running: the rest is killed, then PermissionError names it. The caller closes `root`."""
    from devsy.bounded_wait import WaitTimeout, poll_until  # only here: this module stays standard library

    tree = {root.pid: root}
    unreachable: set[int] = set()  # members we may not signal (another user's): reported once the rest is dead
    done = False
    root.signal(signal.SIGSTOP)
    try:
        for _ in range(_MAX_ROUNDS):  # bounded: a member we could not freeze may go on forking
            with contextlib.suppress(WaitTimeout):  # one that never shows stopped is KILLed all the same
                poll_until(lambda: [pid for pid in tree if pid not in unreachable and _state(pid) not in _STOPPED],
                           lambda running: not running, timeout=FREEZE_WAIT_S, interval=0.005,
                           what="the process tree to stop")
            if not _add_children(tree, unreachable):
                break
        # A zombie is not killed: gone. Nor is one we may not signal: the others are, then the error names it.
        running = [member for pid, member in tree.items() if pid not in unreachable and not member.exited()]
        killed = {one.pid: one for one in stop(running, group=False, grace=0, kill_wait=kill_wait)}
        done = True
    finally:
        for member in tree.values():
            if not done:  # an unexpected error part-way: none of those frozen stays frozen
                with contextlib.suppress(OSError):
                    member.signal(signal.SIGKILL)
            if member is not root:
                member.close()
    if unreachable:
        raise PermissionError(f"not allowed to signal process(es) {', '.join(map(str, sorted(unreachable)))} of the "
                              "tree (another user's); the rest of it was killed")
    return [killed.get(pid, Stopped(pid, Outcome.GONE)) for pid in tree]


_MAX_ROUNDS = 64
# /proc states of a process that runs no more: stopped (by a signal, or by a tracer), zombie, dead; None: gone.
_STOPPED = ("T", "t", "Z", "X", None)


def _add_children(tree: dict[int, Pinned], unreachable: set[int]) -> bool:
    """Pin and freeze the processes outside `tree` whose parent is a live member, into `tree` as each is found (so
    the caller holds every one frozen, also when a later one fails); whether any was found. A member that has exited
    is no parent: once reaped, its pid may be another process's (asked again once the child's pidfd is open). One we
    may not signal joins `unreachable`, and the search goes on below it."""
    live = {pid for pid, member in tree.items() if not member.exited()}

    def parent_still_live(pid: int) -> bool:
        parent = _parent(pid)
        return parent in live and not tree[parent].exited()

    added = False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in tree:
            continue
        pid = int(entry.name)
        if _parent(pid) not in live:
            continue
        child = pin(pid, lambda pid=pid: parent_still_live(pid))  # type: ignore[misc]
        if child is None:
            continue
        tree[pid] = child
        added = True
        try:
            child.signal(signal.SIGSTOP)
        except PermissionError:
            unreachable.add(pid)
    return added


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 (state) on; None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _parent(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def kill_and_reap_group(pgid: int, timeout: float) -> tuple[int, bool]:
    """SIGKILL the group `pgid` of our children (a subreaper's: orphans reparent to it) and reap its members only;
    (how many were reaped, whether all were within `timeout`). Members that started a session of their own are in
    another group and are left alone. Main thread only: a blocked waitpid is bounded by SIGALRM."""
    reaped = 0
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        while _has_child_in(pgid):  # a child of ours is in it: the number is the group's, not a reused one
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)  # again each round: a member may have forked meanwhile
            try:
                os.waitpid(-pgid, 0)
            except ChildProcessError:
                break
            reaped += 1
        return reaped, True
    except _ReapTimeout:
        return reaped, False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _ReapTimeout(Exception):
    pass


def group_members(pgid: int) -> list[int]:
    """Pids of the processes in group `pgid` that still run (zombies excluded), read from /proc."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and fields[0] != "Z" and int(fields[2]) == pgid:  # None: it ended while we looked
            members.append(int(entry.name))
    return members


# How often a group whose leader has ended is looked at (/proc has no event for a group emptying).
GROUP_POLL_S = 0.05


def _groups_left(termed: list[Pinned], left: list[Pinned], deadline: float) -> list[Pinned]:
    """Of the targets whose leader ended within the grace, those whose group still has running members once what
    is left of the grace has passed, and whose group number is provably still theirs (see Pinned.signal)."""
    from devsy.bounded_wait import WaitTimeout, poll_until  # only here: this module stays standard library

    def unfinished() -> list[Pinned]:
        return [target for target in termed
                if target not in left and group_members(target.pid) and target._group_number_held()]  # noqa: SLF001

    try:
        return poll_until(unfinished, lambda targets: not targets, timeout=max(0.0, deadline - time.monotonic()),
                          interval=GROUP_POLL_S, what="the stopped groups to end")
    except WaitTimeout as timeout:
        return list(timeout.last)


def _raise_timeout(*_: object) -> None:
    raise _ReapTimeout


def _has_child_in(pgid: int) -> bool:
    try:
        os.waitid(os.P_PGID, pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _wait_all(targets: list[Pinned], timeout: float) -> list[Pinned]:
    """Those of `targets` still running after `timeout` seconds (one poll over all their pidfds)."""
    deadline = time.monotonic() + timeout
    left = [target for target in targets if not target.exited()]
    while left:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        poller = select.poll()
        for target in left:
            poller.register(target._fd, select.POLLIN)  # noqa: SLF001 - same module
        if not poller.poll(remaining * 1000):
            break
        left = [target for target in left if not target.exited()]
    return left
