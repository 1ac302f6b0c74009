"""devsy.process_tree on real processes: TERM, a bounded grace, KILL; and its refusal to signal a pid that may be
someone else's."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from devsy import process_tree
from devsy.bounded_wait import wait_until
from devsy.process_tree import Outcome

# A child that says "ready" once its TERM disposition is set (so no signal can arrive before that), then sleeps.
_SLEEPER = "import signal, sys, time\n{setup}\nprint('ready', flush=True)\ntime.sleep(600)\n"
_IGNORE_TERM = "signal.signal(signal.SIGTERM, signal.SIG_IGN)"


def _start(setup: str = "", **popen: object) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _SLEEPER.format(setup=setup)], stdout=subprocess.PIPE,
                            start_new_session=True, **popen)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"  # bounded: the child prints it at once, or exits (EOF)
    return proc


@pytest.fixture
def children():
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # cleanup independent of the code under test
        proc.wait(30)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed grandchild is a zombie until init reaps it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_child_that_honours_term_exits_within_the_grace_and_is_reaped(children) -> None:
    proc = _start()
    children.append(proc)
    result = process_tree.stop_child(proc, grace=30)
    assert result.outcome is Outcome.EXITED
    assert proc.returncode == -signal.SIGTERM


def test_a_child_that_ignores_term_is_killed_after_the_grace(children) -> None:
    proc = _start(_IGNORE_TERM)
    children.append(proc)
    result = process_tree.stop_child(proc, grace=0.5)
    assert result.outcome is Outcome.KILLED
    assert proc.returncode == -signal.SIGKILL


def _leader_with_member(children: list, leader_setup: str) -> tuple[subprocess.Popen, int]:
    """A group leader (its TERM disposition set by `leader_setup`) with a member that ignores TERM; (leader, member
    pid), once the member is ready."""
    script = (f"import signal, subprocess, sys\n{leader_setup}\n"
              f"child = subprocess.Popen([sys.executable, '-c', {_SLEEPER.format(setup=_IGNORE_TERM)!r}],"
              " stdout=subprocess.PIPE)\n"
              "assert child.stdout.readline() == b'ready\\n'\n"
              "print(child.pid, flush=True)\nchild.wait()\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True)
    children.append(proc)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_a_group_stop_reaches_a_grandchild_that_ignores_term(children) -> None:
    proc, grandchild = _leader_with_member(children, _IGNORE_TERM)  # the leader is TERM-proof too
    assert _running(grandchild)
    result = process_tree.stop_child(proc, grace=0.5)
    assert result.outcome is Outcome.KILLED
    wait_until(lambda: not _running(grandchild), timeout=30, interval=0.05, what="the grandchild's end")


def test_a_group_whose_leader_honours_term_still_loses_a_member_that_ignores_it(children) -> None:
    # The leader ends at TERM at once; its group keeps a member that ignores TERM: the stop must KILL that member
    # (before the leader is reaped, the leader's zombie holds the group's number, so killpg reaches only its group).
    proc, member = _leader_with_member(children, "")
    started = process_tree.start_time(member)
    try:
        result = process_tree.stop_child(proc, grace=1.0)
        assert proc.returncode == -signal.SIGTERM  # the leader itself ended at TERM
        assert result.outcome is Outcome.KILLED, result
        wait_until(lambda: not _running(member), timeout=30, interval=0.05, what="the TERM-proof member's end")
    finally:
        process_tree.stop_pid(member, started, group=False, grace=0)  # cleanup if the stop under test failed


def test_stop_many_reports_each_outcome(children) -> None:
    polite, stubborn = _start(), _start(_IGNORE_TERM)
    children += [polite, stubborn]
    pinned = [process_tree.pin_child(polite), process_tree.pin_child(stubborn)]
    assert None not in pinned
    try:
        results = process_tree.stop(pinned, group=False, grace=1.0)
    finally:
        for target in pinned:
            target.close()
    assert [r.outcome for r in results] == [Outcome.EXITED, Outcome.KILLED]
    assert (polite.wait(30), stubborn.wait(30)) == (-signal.SIGTERM, -signal.SIGKILL)


def test_a_recorded_start_time_that_differs_means_another_process_and_nothing_is_signalled(children) -> None:
    # What a reused pid looks like to the guard: the same number, another start time.
    proc = _start()
    children.append(proc)
    started = process_tree.start_time(proc.pid)
    assert started is not None
    result = process_tree.stop_pid(proc.pid, started + 1, group=True, grace=0)
    assert result.outcome is Outcome.GONE
    assert proc.poll() is None, "the guard signalled a process it was not told about"
    # The true start time is accepted: the same call then stops it.
    assert process_tree.stop_pid(proc.pid, started, group=True, grace=30).outcome is Outcome.EXITED
    assert proc.wait(30) == -signal.SIGTERM


def test_the_group_of_a_leader_that_is_gone_is_not_signalled_by_number(children) -> None:
    # A group leader that is not our child: once it has exited, nothing proves its number is still its group's
    # (here a member still holds it; with no member left it could be another group's), so the group is not signalled.
    leader_script = ("import subprocess, sys\n"
                     f"m = subprocess.Popen([sys.executable, '-c', {_SLEEPER.format(setup='')!r}],"
                     " stdout=subprocess.PIPE)\n"
                     "assert m.stdout.readline() == b'ready\\n'\nprint(m.pid, flush=True)\nsys.stdin.read()\n")
    parent_script = ("import subprocess, sys\n"
                     f"l = subprocess.Popen([sys.executable, '-c', {leader_script!r}], stdin=subprocess.PIPE,"
                     " stdout=subprocess.PIPE, start_new_session=True)\n"
                     "print(l.pid, int(l.stdout.readline()), flush=True)\nsys.stdin.read()\nl.stdin.close()\n"
                     "sys.exit(l.wait())\n")
    parent = subprocess.Popen([sys.executable, "-c", parent_script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    children.append(parent)
    assert parent.stdout is not None and parent.stdin is not None
    leader, member = (int(word) for word in parent.stdout.readline().split())
    member_start = process_tree.start_time(member)
    try:
        pinned = process_tree.pin_started(leader, process_tree.start_time(leader))
        assert pinned is not None
        with pinned:
            assert pinned.signal(0, group=True) is True  # running: its group number is its own
            parent.stdin.close()  # the leader exits and its parent reaps it; the member runs on in the group
            assert parent.wait(30) == 0
            assert pinned.wait(30)
            assert os.getpgid(member) == leader
            assert pinned.signal(signal.SIGTERM, group=True) is False
            assert pinned.signal(signal.SIGTERM) is False
        assert _running(member), "the group of an exited leader that is not ours was signalled by its number"
    finally:
        process_tree.stop_pid(member, member_start, group=False, grace=0)


def test_collecting_stop_reads_the_pipes_so_a_chatty_child_can_exit_on_term(children) -> None:
    # On TERM it writes far more than a pipe holds, then exits: only a wait that reads lets it finish in its grace.
    setup = ("def bye(*_):\n    sys.stderr.buffer.write(b'x' * (4 << 20)); sys.stderr.flush(); sys.exit(3)\n"
             "signal.signal(signal.SIGTERM, bye)")
    proc = _start(setup, stderr=subprocess.PIPE)
    children.append(proc)
    result = process_tree.stop_child_collecting(proc, grace=60)
    assert result.outcome is Outcome.EXITED
    assert proc.returncode == 3
    assert len(result.stderr) == 4 << 20


def test_kill_and_reap_group_reaps_our_members_only(children) -> None:
    proc = _start()
    other = _start()  # another group of ours: left alone
    children += [proc, other]
    reaped, complete = process_tree.kill_and_reap_group(proc.pid, 30)
    assert (reaped, complete) == (1, True)
    assert not _running(proc.pid)
    assert other.poll() is None
    with pytest.raises(ChildProcessError):  # reaped by the group call: nothing left to wait for
        os.waitpid(proc.pid, os.WNOHANG)
    proc.returncode = -signal.SIGKILL  # tell the handle what the group call already collected


# A tree in its own sessions (no group reaches it all): a child that ignores TERM, a grandchild in a session of its
# own, and a daemon that double-forked away (reparented, so no longer in the tree). It prints the pids once all run.
_TREE = """
set -e
sleep 600 & a=$!
(trap '' TERM; setsid sleep 600 & wait) & b=$!
daemon=$(sh -c 'setsid sleep 600 >/dev/null 2>&1 & echo $!')
echo "$a $b $daemon"
wait
"""


def _descendants(pid: int) -> set[int]:
    import psutil

    return {child.pid for child in psutil.Process(pid).children(recursive=True)}


def test_kill_tree_kills_every_descendant_found_by_parent_links_and_leaves_a_reparented_daemon(children) -> None:
    import psutil

    proc = subprocess.Popen(["sh", "-c", _TREE], stdout=subprocess.PIPE, start_new_session=True)
    children.append(proc)
    assert proc.stdout is not None
    daemon = int(proc.stdout.readline().split()[2])
    wait_until(lambda: len(_descendants(proc.pid)) == 3, timeout=10, interval=0.01, what="the tree to start")
    tree = _descendants(proc.pid)
    assert daemon not in tree  # its parent exited before the line was printed: it was reparented
    try:
        with process_tree.pin_child(proc) as root:  # type: ignore[union-attr]
            stopped = process_tree.kill_tree(root)
        assert {one.pid for one in stopped} == tree | {proc.pid}
        assert all(one.outcome is Outcome.KILLED for one in stopped), stopped
        assert proc.wait(10) == -signal.SIGKILL
        assert not [pid for pid in tree if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
        assert psutil.Process(daemon).status() != "zombie", "the reparented daemon was not in the tree"
    finally:
        if psutil.pid_exists(daemon):
            os.kill(daemon, signal.SIGKILL)


def test_kill_tree_of_a_process_that_already_exited_signals_nothing(children) -> None:
    proc = subprocess.Popen(["true"])
    children.append(proc)
    root = process_tree.pin_child(proc)
    assert root is not None
    with root:
        root.wait(10)  # it exited (a zombie until reaped): nothing of it runs
        assert [one.outcome for one in process_tree.kill_tree(root)] == [Outcome.GONE]


def test_kill_tree_kills_the_rest_of_a_tree_with_a_member_it_may_not_signal(children, monkeypatch) -> None:
    """A member that cannot be signalled (as another user's would be) stops neither the search below it nor the kill
    of the others; the error names it afterwards."""
    import psutil

    # The middle member execs a sleep that keeps its two children: it does not end when they are killed.
    proc = subprocess.Popen(["sh", "-c", "sh -c 'sleep 600 & sleep 600 & exec sleep 601' & sleep 600 & wait"],
                            start_new_session=True)
    children.append(proc)
    wait_until(lambda: len(_descendants(proc.pid)) == 4, timeout=10, interval=0.01, what="the tree to start")
    tree = _descendants(proc.pid)
    wait_until(lambda: any(len(p.children()) == 2 for p in psutil.Process(proc.pid).children()), timeout=10,
               interval=0.01, what="the middle member to exec")
    middle = next(p.pid for p in psutil.Process(proc.pid).children() if len(p.children()) == 2)
    real_signal = process_tree.Pinned.signal

    def refuse_the_middle(self, sig, *, group=False):
        if self.pid == middle and sig != signal.SIGKILL:
            raise PermissionError(1, "Operation not permitted")
        return real_signal(self, sig, group=group)

    monkeypatch.setattr(process_tree.Pinned, "signal", refuse_the_middle)
    try:
        with process_tree.pin_child(proc) as root:  # type: ignore[union-attr]
            with pytest.raises(PermissionError, match=str(middle)):
                process_tree.kill_tree(root)
        assert proc.wait(10) == -signal.SIGKILL
        running = [pid for pid in tree - {middle} if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
        assert not running, f"left running below or beside the member it may not signal: {running}"
        assert psutil.Process(middle).status() != "zombie", "the member it may not signal was signalled after all"
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(middle).kill()


def test_wait_child_returns_the_exit_code_and_reaps(children) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(7)"], stdin=subprocess.PIPE,
                            start_new_session=True)
    children.append(proc)
    assert process_tree.wait_child(proc, 0.05) is None  # still reading: a timeout, and it runs on
    assert proc.returncode is None and _running(proc.pid)
    proc.stdin.close()
    assert process_tree.wait_child(proc, 30) == 7
    assert proc.returncode == 7 and not Path(f"/proc/{proc.pid}").exists()  # reaped: no zombie left
    assert process_tree.wait_child(proc, 30) == 7  # already reaped: the code it had


def test_wait_child_takes_the_code_another_thread_reaped(children) -> None:
    """A child another thread is reaping (Popen.wait holds its lock): the code, not a false timeout."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"], stdin=subprocess.PIPE,
                            start_new_session=True)
    children.append(proc)
    reaper = threading.Thread(target=proc.wait)
    reaper.start()
    proc.stdin.close()
    assert process_tree.wait_child(proc, 30) == 3
    reaper.join(30)


def test_wait_child_takes_the_code_of_a_child_another_thread_is_still_reaping(children) -> None:
    """The other thread has reaped the child (its pid is gone) but not yet recorded the code: still the code, not a
    timeout (a pidfd can no longer be opened then)."""
    reaped, release = threading.Event(), threading.Event()

    class SlowToRecord(subprocess.Popen):
        def _handle_exitstatus(self, *args, **kwargs):  # called after waitpid, under the Popen's waitpid lock
            reaped.set()
            release.wait(30)
            super()._handle_exitstatus(*args, **kwargs)

    proc = SlowToRecord([sys.executable, "-c", "import sys; sys.exit(5)"], start_new_session=True)
    children.append(proc)
    reaper = threading.Thread(target=proc.wait)
    reaper.start()
    try:
        assert reaped.wait(30)
        # Whenever the other thread records the code, before or during the wait below, the answer is the same.
        threading.Timer(0.2, release.set).start()
        assert process_tree.wait_child(proc, 30) == 5
    finally:
        release.set()
        reaper.join(30)
