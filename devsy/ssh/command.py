"""`devsy ssh`: a session in the workspace through the agent, or (`--stdio`) the raw SSH stream for OpenSSH.

The session's stdout and stderr bytes go to our descriptors untouched (no text filter on this path); only devsy's
own diagnostics and the agent's stderr pass the redaction filter. Cancellation (SIGINT/SIGTERM, wired by the CLI to
`cancel`) makes the driver kill the agent's process tree, which holds the command's, and then everything here ends.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from devsy.agent.errors import AgentError, AgentUnsupported
from devsy.agent.guest.pipe_socket import PipeSocket
from devsy.agent.install import install_agent, read_note
from devsy.devcontainer.workspace_ops import OpenWorkspace, open_workspace
from devsy.driver.base import CancelToken
from devsy.errors import Cancelled
from devsy.progress import Progress
from devsy.ssh import terminal
from devsy.ssh.client import (PtyRequest, SessionEnd, SessionRequest, connect, open_session, pump_channel_output,
                              session_end, write_all)
from devsy.ssh.redaction import RedactingWriter, configured_secrets
from devsy.stdin_pump import StdinPump
from devsy.ssh.tunnel import AgentTunnel

# After the session ended or was cancelled, the tunnel ends within the driver's own bounds (kill + drain).
_TUNNEL_JOIN_S = 20.0
_STATUS_WAIT_S = 5.0
_TRANSPORT_JOIN_S = 5.0
_SOCKET_BUFFER = 4 * 1024 * 1024
AGENT_LOG_ENV = "DEVSY_AGENT_LOG"


@dataclass
class SshOptions:
    workspace: str
    command: str | None = None
    user: str = ""
    env: dict[str, str] = field(default_factory=dict)
    stdio: bool = False
    tty: bool = False


@dataclass
class SshStreams:
    """The process's own streams; tests may substitute others."""

    stdin: BinaryIO | None
    stdout_fd: int
    stderr_fd: int
    diagnostics: BinaryIO

    @classmethod
    def of_process(cls) -> SshStreams:
        return cls(stdin=sys.stdin.buffer if sys.stdin else None, stdout_fd=1, stderr_fd=2,
                   diagnostics=sys.stderr.buffer)


def run_ssh(home: Path, options: SshOptions, cancel: CancelToken, streams: SshStreams | None = None) -> int:
    """Run the session (or the stdio proxy); returns the exit code. Raises Cancelled when cancelled."""
    streams = streams or SshStreams.of_process()
    ws = open_workspace(home, options.workspace)
    progress = Progress(quiet=options.stdio)  # under OpenSSH, our stderr is the user's terminal

    def redeliver() -> str:
        return install_agent(ws.driver, ws.record.id, ws.paths, progress, cancel=cancel).guest_path

    note = read_note(ws.paths)
    guest_path = note.guest_path if note is not None else redeliver()
    diagnostics = RedactingWriter(streams.diagnostics, configured_secrets(options.env.values()))
    args = ["ssh-server", "--stdio", "--workdir", ws.record.workspace_folder]
    if os.environ.get(AGENT_LOG_ENV):
        args += ["--log", os.environ[AGENT_LOG_ENV]]  # a path in the guest, for debugging the agent
    try:
        tunnel_kw = dict(stderr=diagnostics, cancel=cancel, redeliver=redeliver)
        if options.stdio:
            return _proxy(ws, guest_path, args, streams, tunnel_kw)
        return _session(ws, guest_path, args, options, streams, tunnel_kw)
    finally:
        diagnostics.close()


def _proxy(ws: OpenWorkspace, guest_path: str, args: list[str], streams: SshStreams, tunnel_kw: dict) -> int:
    if streams.stdin is None:
        raise AgentError("`devsy ssh --stdio` needs a standard input", hint="it is meant as OpenSSH's ProxyCommand")
    tunnel = AgentTunnel(ws.driver, ws.record.id, guest_path, args, input_fd=streams.stdin.fileno(),
                         write_output=lambda data: write_all(streams.stdout_fd, data), **tunnel_kw)
    tunnel.run()
    _raise_for_tunnel(tunnel, ws.record.id)
    assert tunnel.result is not None
    return tunnel.result.exit_code


def _session(ws: OpenWorkspace, guest_path: str, args: list[str], options: SshOptions, streams: SshStreams,
             tunnel_kw: dict) -> int:
    ours, theirs = socket.socketpair()
    for sock in (ours, theirs):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
    tunnel = AgentTunnel(ws.driver, ws.record.id, guest_path, args, input_fd=theirs.fileno(),
                         write_output=theirs.sendall, on_end=lambda: _close_tunnel_end(theirs), **tunnel_kw)
    tunnel.start()  # the agent starts in the guest while we import paramiko here
    transport, end = None, None
    try:
        try:
            stream = PipeSocket(ours.fileno(), ours.fileno(), on_close=lambda: _shutdown(ours, socket.SHUT_RDWR))
            transport = connect(stream, options.user or ws.record.remote_user or "root")
        except Exception as exc:  # paramiko raises SSHException, EOFError or socket errors for a dead stream
            tunnel.join(_TUNNEL_JOIN_S)
            _raise_for_tunnel(tunnel, ws.record.id)
            raise AgentError(f"the SSH handshake with the agent in workspace {ws.record.id} failed: {exc}",
                             hint="retry; if it persists, run with DEVSY_AGENT_LOG=/tmp/agent.log set and read "
                                  "that file in the workspace") from exc
        end = _run_channel(transport, options, streams, tunnel_kw["cancel"])
    finally:
        # Shut the socket down first: paramiko's transport thread then sees end of stream at once instead of at its
        # next 0.1 s poll. The agent sees end of input and exits by itself.
        _shutdown(ours, socket.SHUT_RDWR)
        if transport is not None:
            transport.close()
            transport.join(_TRANSPORT_JOIN_S)  # it saw end of stream at once; then its descriptor may be closed
        ours.close()
        if end is None:
            # Cancelled or failed: the driver is killing the agent's tree; wait (bounded) until that is done.
            tunnel.join(_TUNNEL_JOIN_S)
    if end is None:
        raise Cancelled("cancelled", hint="the command's processes in the workspace were stopped")
    if end.exit_code is None and not end.signal:
        streams.diagnostics.write(b"devsy ssh: the session ended without an exit status\n")
    return end.process_exit_code()


def _run_channel(transport: Any, options: SshOptions, streams: SshStreams, cancel: CancelToken) -> SessionEnd | None:
    interactive = streams.stdin is not None and os.isatty(streams.stdin.fileno()) and \
        (options.command is None or options.tty)
    with contextlib.ExitStack() as stack:
        pty = None
        if interactive:
            fd = streams.stdin.fileno()  # type: ignore[union-attr]
            stack.enter_context(terminal.raw_mode(fd))  # first, so what the user types from now on is kept
            columns, rows = terminal.size(fd)
            pty = PtyRequest(os.environ.get("TERM", "xterm-256color"), columns, rows)
        channel = open_session(transport, SessionRequest(options.command, dict(options.env), pty))
        if pty is not None:
            stack.enter_context(terminal.on_resize(fd, lambda c, r: channel.resize_pty(width=c, height=r)))
            if terminal.size(fd) != (pty.cols, pty.rows):  # resized before the handler was in place
                channel.resize_pty(*terminal.size(fd))
        return _pump_until_end(channel, streams, cancel)


def _pump_until_end(channel: Any, streams: SshStreams, cancel: CancelToken) -> SessionEnd | None:
    done = threading.Event()
    unsubscribe = cancel.on_cancel(done.set)
    broken_pipe = threading.Event()

    def on_broken_pipe() -> None:
        # Whoever reads our output has gone (`devsy ssh ... | head -1`): end the session as OpenSSH does, by closing
        # the channel; the remote command then gets SIGPIPE on its next write.
        broken_pipe.set()
        channel.close()

    outputs = [pump_channel_output(channel, streams.stdout_fd, False, on_broken_pipe),
               pump_channel_output(channel, streams.stderr_fd, True, on_broken_pipe)]
    threading.Thread(target=lambda: ([t.join() for t in outputs], done.set()), daemon=True).start()
    pump = None
    if streams.stdin is not None:
        # A memoryview lets paramiko cut the chunk into packets without copying the rest each time.
        pump = StdinPump(streams.stdin, lambda data: channel.sendall(memoryview(data)), channel.shutdown_write)
        pump.start()
    else:
        channel.shutdown_write()
    try:
        done.wait()
    finally:
        unsubscribe()
        if pump is not None:
            pump.stop()
    if cancel.is_cancelled():
        return None
    if broken_pipe.is_set():
        return SessionEnd(None, "PIPE")  # like a pipeline member killed by SIGPIPE: 141
    channel.status_event.wait(_STATUS_WAIT_S)
    return session_end(channel)


def _raise_for_tunnel(tunnel: AgentTunnel, workspace_id: str) -> None:
    """Turn how the agent's exec ended into the error a user can act on (nothing to do when it ended cleanly)."""
    if tunnel.cancel.is_cancelled():
        raise Cancelled("cancelled", hint="the command's processes in the workspace were stopped")
    if tunnel.error is not None:
        raise tunnel.error
    result = tunnel.result
    if result is None or result.exit_code == 0 or tunnel.output_seen:
        return
    if result.exit_code == 127:
        raise AgentUnsupported(f"workspace {workspace_id} has no python3, which the devsy agent needs",
                               hint="add python3 (>= 3.9) to the image, or use `devsy exec`")
    raise AgentError(f"the devsy agent in workspace {workspace_id} exited {result.exit_code} before speaking SSH "
                     "(its message, if any, is above)",
                     hint=f"run `devsy up {workspace_id}` again to redeliver it, or use `devsy exec`")


def _close_tunnel_end(sock: socket.socket) -> None:
    """The agent's exec has ended: paramiko must see end of stream, and the socket is ours to close."""
    _shutdown(sock, socket.SHUT_RDWR)
    sock.close()


def _shutdown(sock: socket.socket, how: int = socket.SHUT_WR) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(how)
