"""`ssh -L` through the `Host <id>.devsy` entry: the real OpenSSH client, a real HTTP server on loopback, on both
session paths (the agent in an image with python3, exec sessions in one without).

The engine here runs containers with host networking, so the guest's 127.0.0.1 is this machine's: the server the
forward reaches is ours, and the connection to it is made by the guest (the agent's socket, or the exec path's
connector), which is what a forward to a server listening only inside the guest needs.
"""

from __future__ import annotations

import http.server
import secrets
import socket
import threading
from collections.abc import Iterator

import pytest

from devsy.bounded_wait import poll_until

from helpers.cli import HOST_NET
from helpers.local_forwards import LISTEN_BOUND_S, LocalForwards

BODY = b"forwarded through the workspace\n"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(10)


def _connect(port: int) -> socket.socket:
    """A connection to OpenSSH's local listener. It logs "listening" a moment before it accepts: a refused connect
    (which opens no channel) is retried, bounded."""
    return poll_until(lambda: _try_connect(port), lambda sock: sock is not None, timeout=LISTEN_BOUND_S,
                      interval=0.05, what=f"ssh -L's listener on port {port}")


def _try_connect(port: int) -> socket.socket | None:
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=30)
    except ConnectionRefusedError:
        return None


def _get(port: int) -> bytes:
    """One HTTP/1.0 GET on 127.0.0.1:port; the raw reply (b"" when the forward closed or reset the connection before
    a reply)."""
    with _connect(port) as sock:
        reply = b""
        try:
            sock.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
            while chunk := sock.recv(65536):
                reply += chunk
        except ConnectionResetError:
            pass  # OpenSSH resets the local connection of a channel that failed to open
        return reply


def _workspace(request, devsy, kind: str) -> tuple[str, str]:
    """(workspace, its session path) for an image kind: python3 (agent), Debian without it (exec sessions, bash's
    /dev/tcp) or busybox (exec sessions, nc)."""
    if kind == "busybox":
        workspace = f"bb-{secrets.token_hex(4)}"
        devsy.created.add(workspace)
        devsy.up(request.getfixturevalue("busybox_image"), "--id", workspace, *HOST_NET)
    else:
        workspace = request.getfixturevalue("running_workspace" if kind == "agent" else "exec_workspace")
    path = devsy.run("status", workspace, "--json").json["workspace"]["ssh_path"]
    assert path == ("agent" if kind == "agent" else "exec")
    return workspace, path


@pytest.mark.parametrize("kind", ["agent", "exec", "busybox"])
def test_local_forward_reaches_a_loopback_server(request, devsy, http_server, kind):
    workspace, _ = _workspace(request, devsy, kind)
    forward = LocalForwards(devsy, workspace, [http_server])
    try:
        for _ in range(3):  # one connection after another over the same SSH connection
            reply = _get(forward.locals[0])
            assert reply.startswith(b"HTTP/1.0 200") and reply.endswith(BODY), reply
    finally:
        forward.finish()


@pytest.mark.parametrize("kind", ["agent", "exec", "busybox"])
def test_a_refused_destination_closes_the_forwarded_connection(request, devsy, kind):
    workspace, path = _workspace(request, devsy, kind)
    # Bound but not listening: a connection to it is refused, and no other test can take the port meanwhile.
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        refused = reserved.getsockname()[1]
        forward = LocalForwards(devsy, workspace, [refused])
        try:
            assert _get(forward.locals[0]) == b""
        finally:
            stderr = forward.finish()
    if path == "agent":  # reported as the channel's open failure, as sshd does
        assert b"open failed: connect failed" in stderr, stderr
    else:  # the exec path learns it from its connector, after the channel opened
        assert f"the forwarded connection to 127.0.0.1:{refused} failed in the guest".encode() in stderr, stderr
