"""Regression tests from the cold review of exec sessions and `ssh -L` on both session paths (08b333d, ab81f8f,
dc72ad8): each test showed one bug (since fixed) with the real CLI, the real engine and the real OpenSSH client. The engine runs containers with host networking, so
a server on this machine's 127.0.0.1 is one the guest reaches on its own loopback.

The bugs:
1. The agent's check_channel_direct_tcpip_request (devsy/agent/guest/server.py:101) connects to the destination in
   paramiko's transport thread, for up to forward.CONNECT_TIMEOUT_S (10 s): while it waits, every other channel of the
   connection (another forward, a session) stalls.
2. An exec-session forward (ExecForward, bash's /dev/tcp connector) never passes the client's end of the connection
   on: after the client closes its side, the destination keeps a live connection and the guest its connector (and the
   host its exec threads) until the destination itself closes.
3. Exec sessions override an explicit `--env HOME=...` (and remoteEnv's HOME/USER/LOGNAME/SHELL) with the passwd
   values (_LAUNCH exports them after the exec's environment is set); the agent gives the explicit value.
4. Exec sessions do not keep a command's bytes exact: a command that is not UTF-8 reaches the guest with U+FFFD in
   place of its bytes (the argv goes through the engine's JSON), where the agent runs the bytes the client sent.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from helpers.cli import HOST_NET, cli_env
from helpers.local_forwards import LISTEN_BOUND_S, LocalForwards
from test_port_forward import _connect, _get, http_server  # noqa: F401 - fixture

SSH_TIMEOUT_S = 60
# A forwarded GET on loopback takes well under a second; the agent's blocked connect holds it for ~10 s.
STALL_BOUND_S = 7.0
END_BOUND_S = 15.0


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A loopback port whose connects neither succeed nor fail: a listener with a full accept queue (backlog 0 and one
    connection queued) drops new SYNs, so a connect waits until its own timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port), timeout=5)
    with socket.socket() as probe:  # evidence that the queue is full: a second connect times out
        probe.settimeout(0.5)
        with pytest.raises(socket.timeout):
            probe.connect(("127.0.0.1", port))
    yield port
    filler.close()
    listener.close()


@pytest.mark.parametrize("path", ["agent", "exec"])
def test_a_slow_forward_destination_does_not_stall_the_connection(request, devsy, http_server, blackhole, path):
    """Bug 1: one forwarded connection to a destination that does not answer must not hold up the others."""
    workspace = request.getfixturevalue("running_workspace" if path == "agent" else "exec_workspace")
    forwards = LocalForwards(devsy, workspace, [blackhole, http_server])
    stuck = None
    try:
        slow_port, good_port = forwards.locals
        assert _get(good_port).endswith(b"forwarded through the workspace\n")  # the good forward works
        stuck = _connect(slow_port)
        # OpenSSH's own line once it has sent the channel open for this connection to the server.
        forwards.wait_for(f"Connection to port {slow_port} forwarding to 127.0.0.1 port {blackhole} requested".encode())
        started = time.monotonic()
        reply = _get(good_port)
        elapsed = time.monotonic() - started
        assert reply.endswith(b"forwarded through the workspace\n"), reply
        assert elapsed < STALL_BOUND_S, (
            f"a GET through the working forward took {elapsed:.1f} s while another forward's destination did not "
            "answer: the server's transport thread was blocked in that connect")
    finally:
        if stuck is not None:
            stuck.close()
        forwards.close()


class _Destination:
    """A loopback server that accepts one connection and records when that connection's end reaches it."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(4)
        self.port = self._listener.getsockname()[1]
        self.received = b""
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._listener.settimeout(LISTEN_BOUND_S)
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(END_BOUND_S + 30)  # bounded: the test has long given up by then
            try:
                while chunk := conn.recv(65536):
                    self.received += chunk
            except OSError:
                pass
            self.ended.set()  # end of file, a reset or the bound: the forward no longer holds it open

    def close(self) -> None:
        self._listener.close()
        self._thread.join(END_BOUND_S + 35)


@pytest.fixture
def busybox_workspace(devsy, busybox_image: str) -> str:
    """A running workspace of the busybox image (exec sessions, `nc` as the forward's connector)."""
    ws_id = f"bb-{secrets.token_hex(4)}"
    devsy.created.add(ws_id)
    up = devsy.up(busybox_image, "--id", ws_id, *HOST_NET)
    assert up.json["workspace"]["ssh_path"] == "exec", up.text
    return ws_id


_WORKSPACES = {"agent": "running_workspace", "exec": "exec_workspace", "busybox": "busybox_workspace"}


@pytest.mark.parametrize("path", sorted(_WORKSPACES))
def test_a_closed_forwarded_connection_reaches_the_destination(request, devsy, path):
    """Bug 2: when the client closes its forwarded connection, the destination's connection must end too."""
    workspace = request.getfixturevalue(_WORKSPACES[path])
    destination = _Destination()
    forwards = LocalForwards(devsy, workspace, [destination.port])
    try:
        with _connect(forwards.locals[0]) as client:
            client.sendall(b"hello\n")
        # The bytes arrived and the client is gone; the destination must see its connection end.
        assert destination.ended.wait(END_BOUND_S), (
            f"{END_BOUND_S} s after the client closed its forwarded connection the destination still holds a live "
            f"connection (received {destination.received!r}): the guest's connector is still running")
        assert destination.received == b"hello\n"
    finally:
        forwards.close()
        destination.close()


@pytest.mark.parametrize("path", ["agent", "exec"])
def test_explicit_env_home_wins(request, devsy, path):
    """Bug 3: `devsy ssh --env HOME=...` is what the session sees, as on the agent path."""
    workspace = request.getfixturevalue("running_workspace" if path == "agent" else "exec_workspace")
    result = devsy.run("ssh", workspace, "--env", "HOME=/tmp/elsewhere", "--env", "USER=someone", "--command",
                       'echo "$HOME $USER"')
    assert (result.returncode, result.stdout) == (0, b"/tmp/elsewhere someone\n"), result.text


@pytest.mark.parametrize("path", ["agent", "exec"])
def test_a_commands_bytes_are_exact(request, devsy, path):
    """Bug 5: the bytes of an exec request's command reach the guest's shell as the client sent them."""
    workspace = request.getfixturevalue("running_workspace" if path == "agent" else "exec_workspace")
    command = b"printf %s '\xff\xfe' | od -An -tx1"
    result = subprocess.run([b"ssh", b"-F", os.fsencode(devsy.ssh_config), f"{workspace}.devsy".encode(), command],
                            capture_output=True, timeout=SSH_TIMEOUT_S, env=cli_env(devsy), stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stdout.split()) == (0, [b"ff", b"fe"]), result
