"""The agent's SSH server run directly (no container) by the oldest and newest supported CPython found here:
exec with separate streams, exit status and signal, environment, pty, and a second channel on one connection."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from devsy import process_tree
from devsy.agent.build import build_agent
from devsy.agent.guest.pipe_socket import PipeSocket
from devsy.bounded_wait import poll_until
from devsy.agent.errors import AgentError
from devsy.agent.guest.channel_requests import ArgvRefused
from devsy.errors import UsageError
from devsy.ssh import client
from devsy.ssh.client import PtyRequest, SessionRequest, connect, open_session, session_end


def _pythons() -> list:
    found = [sys.executable]
    for minor in ("3.9", "3.13"):
        found += sorted(glob.glob(f"/root/.pyenv/versions/{minor}.*/bin/python{minor}"))[:1]
    return found


@pytest.fixture(scope="module")
def agent_cache(tmp_path_factory):
    """One unpacked-wheels cache for the module (per python tag inside, as on a guest): each agent after an
    interpreter's first run starts warm, as every devsy connection but the first does. A cold first run (unpack and
    byte-compile, ~1.3 s) is what test_agent_build checks, per interpreter; here it was paid again by every test."""
    return tmp_path_factory.mktemp("agent-cache")


@pytest.fixture(params=_pythons(), ids=lambda p: os.path.basename(p))
def agent_transport(request, tmp_path, agent_cache):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DEVSY_AGENT_CACHE": str(agent_cache)}
    proc = subprocess.Popen([request.param, "-E", "-S", str(build_agent().path), "ssh-server", "--stdio",
                             "--workdir", str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    transport = connect(PipeSocket(proc.stdout.fileno(), proc.stdin.fileno()), "root")
    yield transport, tmp_path
    transport.close()
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0  # the agent exits by itself once the client is gone
    proc.stdout.close()


def _run(transport, request: SessionRequest, stdin: bytes = b"") -> tuple[bytes, bytes, object]:
    channel = open_session(transport, request)
    out, err = [], []
    readers = [threading.Thread(target=lambda: out.extend(iter(lambda: channel.recv(1 << 20), b""))),
               threading.Thread(target=lambda: err.extend(iter(lambda: channel.recv_stderr(1 << 20), b"")))]
    for reader in readers:
        reader.start()
    channel.sendall(stdin)
    channel.shutdown_write()
    for reader in readers:
        reader.join(30)
    channel.status_event.wait(30)
    return b"".join(out), b"".join(err), session_end(channel)


def test_exec_streams_status_env_and_workdir(agent_transport):
    transport, workdir = agent_transport
    out, err, end = _run(transport, SessionRequest('cat; printf "%s|%s" "$DEMO" "$PWD"; printf e >&2; exit 23',
                                                   env={"DEMO": "v a l"}), stdin=b"\x00in\xff")
    assert (out, err) == (b"\x00in\xffv a l|" + str(workdir).encode(), b"e")
    assert (end.exit_code, end.signal) == (23, "")


def test_signal_death_is_reported_as_exit_signal(agent_transport):
    transport, _ = agent_transport
    _, _, end = _run(transport, SessionRequest("kill -KILL $$"))
    assert (end.signal, end.process_exit_code()) == ("KILL", 137)


def test_pty_session_sees_a_terminal_of_the_requested_size(agent_transport):
    transport, _ = agent_transport
    out, err, end = _run(transport, SessionRequest('test -t 0 && stty size && echo "$TERM"',
                                                   pty=PtyRequest("vt100", cols=77, rows=11)))
    assert out.replace(b"\r\n", b"\n") == b"11 77\nvt100\n" and err == b"" and end.exit_code == 0


def test_sessions_run_one_after_another_on_one_connection(agent_transport):
    transport, _ = agent_transport
    assert [_run(transport, SessionRequest(f"echo {i}"))[0] for i in range(3)] == [b"0\n", b"1\n", b"2\n"]


def test_channels_close_cleanly_while_keys_are_re_exchanged(agent_transport):
    """paramiko re-exchanges keys every 512 MiB; a long-lived connection (devsy ssh's master) crosses that. A channel
    closing during a re-exchange used to stall the transport thread for 30 s (see kex_safe.py). Here the client
    re-keys every 16 KiB, so most of these sessions end while keys are being exchanged."""
    transport, _ = agent_transport
    transport.packetizer.REKEY_BYTES = transport.packetizer.REKEY_PACKETS = 1 << 14
    for _ in range(25):
        channel = open_session(transport, SessionRequest("head -c 100000 /dev/zero"))
        received = 0
        while data := channel.recv(1 << 20):
            received += len(data)
        assert channel.status_event.wait(10), "the exit status did not arrive: the transport stalled"
        assert (received, session_end(channel).exit_code) == (100000, 0)
    assert transport.is_active()


def test_a_session_whose_channel_the_client_closes_is_hung_up(agent_transport):
    # The connection stays; only the channel goes. Its program must not run on with nobody to read or end it.
    transport, _ = agent_transport
    channel = open_session(transport, SessionRequest("echo $$; exec sleep 4242"))
    line = b""
    while not line.endswith(b"\n"):
        chunk = channel.recv(64)
        assert chunk, line
        line += chunk
    pinned = process_tree.pin_started(int(line), process_tree.start_time(int(line)))
    assert pinned is not None
    with pinned:
        channel.close()
        poll_until(pinned.exited, bool, timeout=20, interval=0.05, what="the hung-up session's program to end")
    # The connection still serves sessions.
    out, _, end = _run(transport, SessionRequest("echo still"))
    assert (out, end.exit_code) == (b"still\n", 0)


def _thread_states(pid: int) -> list[str]:
    states = []
    for stat in glob.glob(f"/proc/{pid}/task/*/stat"):
        try:
            states.append(open(stat).read().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:  # that thread ended meanwhile
            continue
    return states


@pytest.mark.parametrize("request_kind", ["exec", "argv"])
def test_an_agent_that_never_answers_a_request_is_an_error_within_the_deadline(tmp_path, agent_cache, monkeypatch,
                                                                              request_kind):
    """paramiko waits for the answer to a channel request without a deadline; devsy bounds it. The agent is stopped
    (SIGSTOP) after the channel opens, so the request reaches a connection nobody answers on."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DEVSY_AGENT_CACHE": str(agent_cache)}
    proc = subprocess.Popen([sys.executable, "-E", "-S", str(build_agent().path), "ssh-server", "--stdio",
                             "--workdir", str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    transport = connect(PipeSocket(proc.stdout.fileno(), proc.stdin.fileno()), "root")
    request = {"exec": SessionRequest("true"),
               "argv": SessionRequest(None, argv=["true"], workdir=str(tmp_path))}[request_kind]
    try:
        channel = client.open_channel(transport, request)
        monkeypatch.setattr(client, "HANDSHAKE_TIMEOUT_S", 1.0)
        proc.send_signal(signal.SIGSTOP)
        # A thread blocked on the stream is stopped only once the thread the kernel chose to take the signal runs;
        # until then it could still read the request and answer it.
        poll_until(lambda: _thread_states(proc.pid), lambda states: set(states) == {"T"}, timeout=20,
                   interval=0.005, what="every thread of the stopped agent to be stopped")
        started = time.monotonic()
        with pytest.raises(AgentError, match="did not answer the session's request within 1s"):
            client.start_command(channel, request)  # not ArgvRefused: no answer is no proof that nothing ran
        assert time.monotonic() - started < 20
    finally:
        proc.send_signal(signal.SIGCONT)
        transport.close()
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        proc.stdout.close()


def test_an_env_value_that_cannot_be_sent_is_a_usage_error_that_names_only_the_variable(agent_transport) -> None:
    # A lone surrogate outside the surrogate escapes (a devcontainer.json "\ud800") has no bytes to send as.
    transport, _ = agent_transport
    with pytest.raises(UsageError) as refused:
        open_session(transport, SessionRequest("true", env={"TOKEN": "s3cr3t\ud800"}))
    assert "TOKEN" in str(refused.value) and "s3cr3t" not in str(refused.value) \
        and "\\ud800" not in str(refused.value), refused.value
    out, _, end = _run(transport, SessionRequest("printf %s \"$A\"", env={"A": "caf\udce9"}))  # an escape is sent
    assert (out, end.exit_code) == (b"caf\xe9", 0)


def test_a_refused_argv_request_is_argv_refused_and_a_closed_channel_is_not(agent_transport) -> None:
    """ArgvRefused lets the caller run the command another way, so it is raised only for the agent's own refusal
    (here: an empty argv), never for a channel that closed under the request."""
    transport, workdir = agent_transport
    refused = SessionRequest(None, argv=[], workdir=str(workdir))
    with pytest.raises(ArgvRefused):
        client.start_command(client.open_channel(transport, refused), refused)
    request = SessionRequest(None, argv=["true"], workdir=str(workdir))
    channel = client.open_channel(transport, request)
    channel.close()
    with pytest.raises(AgentError, match="refused or dropped"):
        client.start_command(channel, request)  # at once: no answer can come on a closed channel
    assert transport.is_active()
