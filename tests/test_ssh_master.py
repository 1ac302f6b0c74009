"""devsy ssh's master on the real engine: sessions share it, it ends with the workspace (stop, delete, recreate, idle,
crash), a killed client still gets its command killed, and only our own uid may use it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.cli import DEVSY, HOST_NET, cli_env

from devsy.ssh.mux.processes import masters_under
from fixtures.process_observer import ProcessObserver

CANCEL_BOUND_S = 10.0
MIB = 1024 * 1024


def _ssh(devsy, workspace: str, command: str, *, input: bytes = b"", **env: str):
    return devsy.run("ssh", workspace, "--command", command, input=input, extra_env=env or None)


def _master_pids(devsy) -> list[int]:
    return [process.pid for process, _ in masters_under(devsy.home)]


def _wait_gone(pid: int, timeout: float) -> bool:
    """True once process `pid` has exited (pidfd: no polling), False if it is still there after `timeout`."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def _container(docker_client, workspace: str):
    return docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={workspace}"})[0]


AGENT_SERVER = "ssh-server"  # an argument of every agent serving a connection (one word: argv is NUL-separated)


def _agent_servers(container) -> list[int]:
    script = "for d in /proc/[0-9]*; do echo \"${d#/proc/} $(tr '\\0' ' ' < $d/cmdline)\"; done"
    out = container.exec_run(["sh", "-c", script], user="0").output.decode()
    return [int(line.split()[0]) for line in out.splitlines()
            if AGENT_SERVER in line and line.split(None, 1)[1:2] and line.split(None, 1)[1].startswith("python3")]


def _start_and_read_ready(devsy, workspace: str, docker_client, command: str):
    """`devsy ssh --command` started in the background, an observer of its guest, and the pids of its `ready` line."""
    observer = ProcessObserver.via_docker(_container(docker_client, workspace).id)
    proc = subprocess.Popen([*DEVSY, "ssh", workspace, "--command", command], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(devsy))
    line = proc.stdout.readline()
    match = re.fullmatch(rb"ready ([\d ]+)\n", line)
    if not match:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"no ready line: {line!r}")
    return proc, observer, [int(pid) for pid in match[1].split()]


def test_sessions_share_one_master_which_delete_stops(devsy, running_workspace):
    assert _master_pids(devsy) == []
    first = _ssh(devsy, running_workspace, "echo one")
    assert (first.returncode, first.stdout) == (0, b"one\n"), first.stderr
    [pid] = _master_pids(devsy)
    second = _ssh(devsy, running_workspace, "echo two >&2; exit 7")
    assert (second.returncode, second.stdout, second.stderr) == (7, b"", b"two\n")
    assert _master_pids(devsy) == [pid]
    assert devsy.run("delete", running_workspace).returncode == 0
    assert _master_pids(devsy) == [] and _wait_gone(pid, 0)  # gone when delete returns, not later


def test_concurrent_first_sessions_start_one_master_and_are_byte_exact(devsy, running_workspace):
    inputs = [os.urandom(MIB + n) for n in range(4)]
    procs = [subprocess.Popen([*DEVSY, "ssh", running_workspace, "--command", f"cat; printf 'err{n}' >&2"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=cli_env(devsy)) for n in range(4)]
    results = [proc.communicate(data, timeout=120) for proc, data in zip(procs, inputs)]
    for n, ((out, err), data) in enumerate(zip(results, inputs)):
        assert hashlib.sha256(out).hexdigest() == hashlib.sha256(data).hexdigest() and err == f"err{n}".encode()
    assert [proc.returncode for proc in procs] == [0] * 4
    assert len(_master_pids(devsy)) == 1


def test_a_killed_client_has_its_command_tree_killed_and_the_master_stays(devsy, running_workspace, docker_client):
    assert _ssh(devsy, running_workspace, "true").returncode == 0
    [master] = _master_pids(devsy)
    nonce = f"nonce-{secrets.token_hex(8)}"
    command = f': {nonce}; python3 -c "import time; time.sleep(4242)" {nonce} & echo "ready $$ $!"; wait'
    proc, observer, pids = _start_and_read_ready(devsy, running_workspace, docker_client, command)
    try:
        tree = [observer.identify(pid, nonce) for pid in pids]
        proc.kill()  # no chance to say goodbye: the master notices its control socket closing
        killed = time.monotonic()
        proc.wait(timeout=10)
        assert observer.wait_dead(tree, timeout=CANCEL_BOUND_S) == []
        assert time.monotonic() - killed < CANCEL_BOUND_S
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert _master_pids(devsy) == [master]
    assert _ssh(devsy, running_workspace, "echo still").stdout == b"still\n"


def test_a_crashed_master_is_replaced_and_its_agent_exits(devsy, running_workspace, docker_client):
    assert _ssh(devsy, running_workspace, "true").returncode == 0
    [old] = _master_pids(devsy)
    container = _container(docker_client, running_workspace)
    observer = ProcessObserver.via_docker(container.id)
    [old_agent] = [observer.identify(pid, AGENT_SERVER) for pid in _agent_servers(container)]
    os.kill(old, signal.SIGKILL)
    assert _wait_gone(old, 10)
    after = _ssh(devsy, running_workspace, "echo again")
    assert (after.returncode, after.stdout) == (0, b"again\n"), after.stderr
    [new] = _master_pids(devsy)
    assert new != old
    # The crashed master's agent saw its stream end and exited; only the new master's agent is left.
    assert observer.wait_dead([old_agent], timeout=10) == []
    assert len(_agent_servers(container)) == 1


def test_stop_ends_the_master_and_a_started_workspace_gets_a_new_one(devsy, running_workspace):
    assert _ssh(devsy, running_workspace, "true").returncode == 0
    [old] = _master_pids(devsy)
    assert devsy.run("stop", running_workspace).returncode == 0
    assert _master_pids(devsy) == [] and _wait_gone(old, 0)
    assert devsy.run("start", running_workspace).returncode == 0
    assert _ssh(devsy, running_workspace, "echo back").stdout == b"back\n"
    assert len(_master_pids(devsy)) == 1


def test_recreate_replaces_the_master(devsy, running_workspace, tmp_path):
    assert _ssh(devsy, running_workspace, "true").returncode == 0
    [old] = _master_pids(devsy)
    devsy.up(tmp_path / "running-project", "--id", running_workspace, "--recreate", *HOST_NET)
    assert _wait_gone(old, 0)
    assert _ssh(devsy, running_workspace, "echo new").stdout == b"new\n"
    assert _master_pids(devsy) not in ([], [old])


def test_an_idle_master_exits_after_its_persist_time(devsy, running_workspace):
    assert _ssh(devsy, running_workspace, "true", DEVSY_SSH_PERSIST_S="1").returncode == 0
    [pid] = _master_pids(devsy)
    assert _wait_gone(pid, 15)


def test_without_a_master_each_session_connects_itself(devsy, running_workspace):
    data = os.urandom(MIB)
    result = devsy.run("ssh", running_workspace, "--command", "cat; exit 5", input=data,
                       extra_env={"DEVSY_SSH_MUX": "0"})
    assert (result.returncode, result.stdout == data) == (5, True), result.stderr
    assert _master_pids(devsy) == []


# Run by /usr/bin/python3 (stdlib only): another uid cannot read the project's virtualenv under /root.
FOREIGN_PYTHON = "/usr/bin/python3"
_PEER = """
import socket, struct, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(bytes.fromhex(sys.argv[1]))
message = b'{"op": "ping"}'
try:
    sock.sendall(struct.pack(">I", len(message)) + message)
    print(sock.recv(4096).decode() or "hung up")
except (ConnectionResetError, BrokenPipeError):  # the master may close before our request is even sent
    print("hung up")
"""


def _address(devsy, workspace: str) -> bytes:
    from devsy.ssh.mux.protocol import master_address

    record = json.loads((devsy.home / "workspaces" / workspace / "workspace.json").read_text())
    return master_address(str(devsy.home), workspace, record["uid"])


def test_the_master_serves_only_its_own_uid(devsy, running_workspace):
    assert _ssh(devsy, running_workspace, "true").returncode == 0
    address = _address(devsy, running_workspace).hex()
    ours = subprocess.run([sys.executable, "-c", _PEER, address], capture_output=True, timeout=30)
    assert b'"pong"' in ours.stdout, ours
    theirs = subprocess.run([FOREIGN_PYTHON, "-c", _PEER, address], capture_output=True, timeout=30, user=65534,
                            group=65534)
    assert theirs.stdout == b"hung up\n", theirs


def test_the_client_refuses_a_master_of_another_uid(devsy, running_workspace):
    squatter = subprocess.Popen(
        [FOREIGN_PYTHON, "-c", "import socket, sys; s = socket.socket(socket.AF_UNIX); "
                               "s.bind(bytes.fromhex(sys.argv[1])); s.listen(); print('up', flush=True); "
                               "sys.stdin.read()", _address(devsy, running_workspace).hex()],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, user=65534, group=65534)
    try:
        assert squatter.stdout.readline() == b"up\n"
        result = _ssh(devsy, running_workspace, "true")
        assert result.returncode != 0 and b"runs as uid 65534" in result.stderr, result.stderr
    finally:
        squatter.kill()
        squatter.wait(timeout=10)


def test_broken_pipe_through_the_master_ends_like_a_pipeline(devsy, running_workspace):
    result = subprocess.run(["bash", "-c", f"{' '.join(DEVSY)} ssh {running_workspace} --command yes | head -1; "
                                           "echo \"status ${PIPESTATUS[0]}\""],
                            capture_output=True, timeout=60, env=cli_env(devsy))
    assert result.stdout == b"y\nstatus 141\n", result  # 128 + SIGPIPE, like `yes | head -1`


def test_errors_from_the_master_start_are_the_full_paths_errors(devsy, running_workspace):
    assert devsy.run("stop", running_workspace).returncode == 0
    via_master = _ssh(devsy, running_workspace, "true")
    direct = _ssh(devsy, running_workspace, "true", DEVSY_SSH_MUX="0")
    assert via_master.returncode == direct.returncode != 0
    assert via_master.stderr == direct.stderr and b"is stopped" in direct.stderr
    assert _master_pids(devsy) == []
    assert not Path(devsy.home / "workspaces" / running_workspace / "ssh-master.log").read_text().count("Traceback")


def _guest_pids(container, nonce: str) -> list[str]:
    # `[n]once-...` matches the nonce but not this shell's own command line, which holds the pattern.
    out = container.exec_run(["sh", "-c", f"pgrep -f '[{nonce[0]}]{nonce[1:]}' || true"], user="0").output.decode()
    return out.split()


def test_a_client_gone_before_its_command_started_leaves_nothing_running(devsy, running_workspace, docker_client):
    """The master may be busy connecting as a new user when its client dies; the command must not run on."""
    from devsy.ssh.mux.client import connect
    from devsy.ssh.mux.protocol import MessageStream

    assert _ssh(devsy, running_workspace, "true").returncode == 0  # a master, connected as dev only
    record = json.loads((devsy.home / "workspaces" / running_workspace / "workspace.json").read_text())
    sock, _ = connect(devsy.home, record)
    nonce = f"nonce-{secrets.token_hex(8)}"
    with open(os.devnull, "rb") as null, open(os.devnull, "wb") as sink:
        MessageStream(sock).send({"op": "session", "command": f"exec python3 -c 'import time; time.sleep(4242)' "
                                  f"{nonce}", "user": "alt", "env": {}, "pty": None, "stdin": False},
                                 fds=[null.fileno(), sink.fileno(), sink.fileno()])
    sock.close()  # gone while the master starts the `alt` connection
    # The master logs the dropped client once it has dealt with it (the command sent, then killed).
    log = devsy.home / "workspaces" / running_workspace / "ssh-master.log"
    deadline = time.monotonic() + 2 * CANCEL_BOUND_S
    while "client dropped" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the master's log: it has no other way to say it is done
    assert "client dropped" in log.read_text()
    assert _guest_pids(_container(docker_client, running_workspace), nonce) == [], "the command outlived its client"


def test_cancel_reaches_what_a_finished_shell_left_running(devsy, running_workspace, docker_client):
    nonce = f"nonce-{secrets.token_hex(8)}"
    # The shell exits at once; its background child keeps the session's output open.
    command = f'python3 -c "import time; time.sleep(4242)" {nonce} & echo "ready $!"'
    proc, observer, pids = _start_and_read_ready(devsy, running_workspace, docker_client, command)
    try:
        orphan = [observer.identify(pid, nonce) for pid in pids]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=CANCEL_BOUND_S) == 128 + signal.SIGINT
        assert observer.wait_dead(orphan, timeout=CANCEL_BOUND_S) == []
    finally:
        proc.kill()
        proc.communicate()


def test_a_session_lasts_until_its_command_exits_not_until_its_output_closes(devsy, running_workspace):
    started = time.monotonic()
    result = _ssh(devsy, running_workspace, "exec >/dev/null 2>&1; sleep 6; exit 7")
    assert result.returncode == 7 and time.monotonic() - started >= 6, result


def test_started_and_end_arriving_in_one_read_are_both_seen():
    import socket as socket_module

    from devsy.ssh.mux.client import _await_end, _Signals
    from devsy.ssh.mux.protocol import MessageStream

    ours, theirs = socket_module.socketpair()
    with ours, theirs:
        master = MessageStream(theirs)
        master.send({"op": "started"})
        master.send({"op": "end", "exit_code": 3, "signal": ""})
        signals = _Signals()
        try:
            assert _await_end(MessageStream(ours), signals, None) == ({"op": "end", "exit_code": 3, "signal": ""},
                                                                       True)
        finally:
            signals.close()
