"""Faults a hostile tester found in `devsy ssh` (issue 11): a wedged (SIGSTOPped) SSH master is never waited on
forever, a session lost with its workspace says so, and bad DEVSY_SSH_* values are refused. Real CLI, real engine."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import select
import signal
import subprocess

import pytest
from helpers.cli import DEVSY, cli_env

from devsy.ssh.mux.processes import masters_under
from fixtures.process_observer import ProcessObserver

# A wedged master is pinged after 3 s of silence and given up on 15 s later; a new one then starts. Generous: this
# bounds a hang (the fault waited for ever), it does not measure the rule.
WEDGE_BOUND_S = 90.0


def _master_pids(devsy) -> list[int]:
    return [process.pid for process, _ in masters_under(devsy.home)]


def _container(docker_client, workspace: str):
    return docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={workspace}"})[0]


def _gone(pidfd: int, timeout: float) -> bool:
    """True once the process of `pidfd` has exited."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


@contextlib.contextmanager
def _stopped_master(devsy, workspace: str):
    """The workspace's master, SIGSTOPped (through a pidfd: no signal can reach a reused pid); yields (pid, pidfd)."""
    assert devsy.run("ssh", workspace, "--command", "true").returncode == 0
    [pid] = _master_pids(devsy)
    pidfd = os.pidfd_open(pid)
    signal.pidfd_send_signal(pidfd, signal.SIGSTOP)
    try:
        yield pid, pidfd
    finally:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # if the test failed with it still there
        os.close(pidfd)


def test_a_stopped_master_is_replaced_and_the_command_runs_exactly_once(devsy, running_workspace, docker_client):
    marker = f"/tmp/ran-{secrets.token_hex(6)}"
    with _stopped_master(devsy, running_workspace) as (old, pidfd):
        # capture_output: the call returns only once every copy of its stdout/stderr is closed, the stopped master's
        # too (the fault: `out=$(devsy ssh ...)` blocked for ever); past the bound, TimeoutExpired fails the test.
        result = devsy.run("ssh", running_workspace, "--command", f"echo ran >> {marker}; echo done",
                           timeout=WEDGE_BOUND_S)
        assert (result.returncode, result.stdout) == (0, b"done\n"), result.stderr
        assert b"has not answered" in result.stderr and b"killed it, starting a new one" in result.stderr
        assert _gone(pidfd, 0), "the wedged master was not killed"
    assert _master_pids(devsy) not in ([], [old])
    ran = _container(docker_client, running_workspace).exec_run(["cat", marker], user="0")
    assert ran.output == b"ran\n", ran  # once: by the new master, never by the killed one


def test_a_master_stopped_during_a_session_is_killed_and_the_client_exits(devsy, running_workspace, docker_client):
    """After `started` the command is never run again: the client reports the wedge, kills the master (so the
    caller's pipes close) and exits 255; the killed master's connection to the agent ends, hanging the command up."""
    nonce = f"nonce-{secrets.token_hex(8)}"
    command = f': {nonce}; python3 -c "import time; time.sleep(4242)" {nonce} & echo "ready $$ $!"; wait'
    observer = ProcessObserver.via_docker(_container(docker_client, running_workspace).id)
    assert devsy.run("ssh", running_workspace, "--command", "true").returncode == 0
    [old] = _master_pids(devsy)
    pidfd = os.pidfd_open(old)
    proc = subprocess.Popen([*DEVSY, "ssh", running_workspace, "--command", command], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(devsy))
    try:
        match = re.fullmatch(rb"ready ([\d ]+)\n", proc.stdout.readline())
        assert match, "the command did not start"
        tree = [observer.identify(int(pid), nonce) for pid in match[1].split()]
        signal.pidfd_send_signal(pidfd, signal.SIGSTOP)
        out, err = proc.communicate(timeout=WEDGE_BOUND_S)  # EOF on both pipes: the master's copies are closed too
        assert proc.returncode == 255, err
        assert b"during the session, so it was killed" in err and b"outcome is unknown" in err, err
        assert b"Traceback" not in err
        assert _gone(pidfd, 0), "the wedged master was not killed"
        assert observer.wait_dead(tree, timeout=30) == []
    finally:
        with contextlib.suppress(ProcessLookupError):  # first: a stopped master would keep the pipes below open
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        os.close(pidfd)
        proc.kill()
        proc.communicate(timeout=30)
    again = devsy.run("ssh", running_workspace, "--command", "echo again")
    assert (again.returncode, again.stdout) == (0, b"again\n"), again.stderr


def _start_session(devsy, workspace: str, **env: str) -> subprocess.Popen:
    proc = subprocess.Popen([*DEVSY, "ssh", workspace, "--command", "echo ready; exec sleep 4242"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=cli_env(devsy, **env))
    if proc.stdout.readline() != b"ready\n":
        proc.kill()
        raise AssertionError(f"the session did not start: {proc.communicate()}")
    return proc


@pytest.mark.parametrize("mux", ["1", "0"], ids=["master", "direct"])
def test_a_session_whose_workspace_is_killed_says_it_stopped(devsy, running_workspace, docker_client, mux):
    proc = _start_session(devsy, running_workspace, DEVSY_SSH_MUX=mux)
    _container(docker_client, running_workspace).kill()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 255, err
    assert f"workspace {running_workspace} stopped during the session".encode() in err, err
    assert f"devsy start {running_workspace}".encode() in err and b"without an exit status" not in err


@pytest.mark.parametrize("mux", ["1", "0"], ids=["master", "direct"])
def test_a_session_ended_by_devsy_delete_names_it(devsy, running_workspace, docker_client, mux):
    """What `devsy delete` does to a session, step by step with the real pieces (so this test does not depend on the
    rest of delete): it holds the workspace lock, asks the master to exit, removes the instance."""
    import json

    from devsy.ssh.mux.client import stop_master
    from devsy.workspace.lock import workspace_lock
    from devsy.workspace.paths import workspace_paths

    proc = _start_session(devsy, running_workspace, DEVSY_SSH_MUX=mux)
    record = json.loads((devsy.home / "workspaces" / running_workspace / "workspace.json").read_text())
    command = f"devsy delete {running_workspace}"
    with workspace_lock(workspace_paths(devsy.home, running_workspace), command=command):
        assert stop_master(devsy.home, running_workspace, record["uid"]) == (mux == "1")
        _container(docker_client, running_workspace).remove(force=True)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 255, err
    assert f"the session in workspace {running_workspace} was ended by `{command}` (pid {os.getpid()})".encode() in err
    assert b"without an exit status" not in err


BAD_VALUES = [("DEVSY_SSH_MUX", value) for value in ("2", "yes", "", "off")] + [
    ("DEVSY_SSH_PERSIST_S", value) for value in ("abc", "0", "-5", "nan", "inf", "", "1e400")]


@pytest.mark.parametrize(("name", "value"), BAD_VALUES, ids=[f"{n}={v!r}" for n, v in BAD_VALUES])
@pytest.mark.parametrize("stdio", [False, True], ids=["session", "stdio"])
def test_bad_ssh_settings_are_refused(devsy, name, value, stdio):
    """Refused before anything else happens (here: before looking for the workspace), naming the variable and what
    it accepts."""
    result = devsy.run("ssh", "no-such-workspace", *(["--stdio"] if stdio else ["--command", "true"]),
                       extra_env={name: value})
    assert result.returncode == 2, result.stderr
    accepted = b"must be 0" if name == "DEVSY_SSH_MUX" else b"must be a number of seconds greater than 0"
    assert f"{name}={value!r} is not valid".encode() in result.stderr and accepted in result.stderr, result.stderr
    assert b"Traceback" not in result.stderr


@pytest.mark.parametrize(("name", "value"), [("DEVSY_SSH_MUX", "0"), ("DEVSY_SSH_MUX", "1"),
                                             ("DEVSY_SSH_PERSIST_S", "0.5"), ("DEVSY_SSH_PERSIST_S", "3600")])
def test_good_ssh_settings_are_accepted(devsy, name, value):
    result = devsy.run("ssh", "no-such-workspace", "--command", "true", extra_env={name: value})
    assert result.returncode != 2 and b"no-such-workspace" in result.stderr, result.stderr


@pytest.mark.parametrize(("left_unread", "started"), [
    ([{"op": "pong"}, {"op": "started"}], True),  # it sent the command on just before it was killed: never rerun
    ([{"op": "pong"}], False),
    ([], False),
    (None, True),  # a garbled frame: it may have said `started`, so the command is never run again
])
def test_what_a_killed_master_left_unread_decides_whether_the_command_may_rerun(left_unread, started):
    import socket

    from devsy.ssh.mux.client import _started_before_death
    from devsy.ssh.mux.protocol import MessageStream

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if left_unread is None:
            theirs.sendall(b"\xff" * 16)  # no frame header can announce that much
        for message in left_unread or ():
            MessageStream(theirs).send(message)
        theirs.close()  # the master is dead: its end is closed
        assert _started_before_death(MessageStream(ours)) is started
    finally:
        ours.close()
