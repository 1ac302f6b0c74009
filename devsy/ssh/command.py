"""`devsy ssh` on a connection of its own: `--stdio` (the raw SSH stream for OpenSSH's ProxyCommand), DEVSY_SSH_MUX=0,
and whatever the master path (mux/client.py) leaves to it. The SSH master uses the same pieces (connection.py).

The session's stdout and stderr bytes go to our descriptors untouched (no text filter on this path); only devsy's
own diagnostics and the agent's stderr pass the redaction filter. Cancellation (SIGINT/SIGTERM, wired by the CLI to
`cancel`) makes the driver kill the agent's process tree, which holds the command's, and then everything here ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from devsy.agent.errors import AgentError
from devsy.devcontainer.session_env import SessionEnv, agent_session_env, workspace_session_env
from devsy.workspace.operations import OpenWorkspace, open_workspace
from devsy.workspace.paths import WorkspacePaths
from devsy.driver.base import CancelToken
from devsy.errors import Cancelled
from devsy.progress import Progress
from devsy.redaction import RedactingWriter, configured_secrets
from devsy.ssh import terminal
from devsy.ssh.client import PtyRequest, SessionEnd, SessionRequest, open_session, pump_until_end
from devsy.ssh.connection import (AgentPath, exec_session_tunnel, lost_session_error, open_agent_connection,
                                  raise_for_tunnel, server_args)
from devsy.ssh.tunnel import AgentTunnel
from devsy.stdin_pump import write_all


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
    """Run the session (or the stdio proxy) over a connection of its own; returns the exit code. Raises Cancelled
    when cancelled."""
    streams = streams or SshStreams.of_process()
    ws = open_workspace(home, options.workspace)
    progress = Progress(quiet=options.stdio)  # under OpenSSH, our stderr is the user's terminal
    agent = AgentPath(ws, progress, cancel)
    diagnostics = RedactingWriter(streams.diagnostics, configured_secrets(options.env.values()))
    try:
        if options.stdio:
            return _proxy(ws, agent, streams, diagnostics, cancel)
        return _session(ws, agent, options, streams, diagnostics, cancel)
    finally:
        diagnostics.close()


def _proxy(ws: OpenWorkspace, agent: AgentPath, streams: SshStreams, diagnostics: BinaryIO,
           cancel: CancelToken) -> int:
    if streams.stdin is None:
        raise AgentError("`devsy ssh --stdio` needs a standard input", hint="it is meant as OpenSSH's ProxyCommand")
    # OpenSSH sends no remoteEnv: the agent gives it to every session of this connection (agent/guest/process.py).
    remote = workspace_session_env(ws.record, ws.paths, lambda: ws.driver)
    if agent.exec_sessions():
        return _proxy_exec_sessions(ws, streams, diagnostics, remote, cancel)
    tunnel = AgentTunnel(ws.driver, ws.record.id, agent.get(), server_args(ws), input_fd=streams.stdin.fileno(),
                         write_output=lambda data: write_all(streams.stdout_fd, data), stderr=diagnostics,
                         cancel=cancel, redeliver=agent.redeliver, env=agent_session_env(remote))
    tunnel.run()
    raise_for_tunnel(tunnel, ws.record.id)
    assert tunnel.result is not None
    return tunnel.result.exit_code


def _proxy_exec_sessions(ws: OpenWorkspace, streams: SshStreams, diagnostics: BinaryIO, remote: SessionEnv,
                         cancel: CancelToken) -> int:
    """The stdio proxy of a workspace with exec sessions: the SSH server itself runs here, on our stdin/stdout."""
    assert streams.stdin is not None  # checked by _proxy
    tunnel = exec_session_tunnel(ws, read_fd=streams.stdin.fileno(), write_fd=streams.stdout_fd, cancel=cancel,
                                 stderr=diagnostics, base_env=remote)
    tunnel.run()
    raise_for_tunnel(tunnel, ws.record.id)
    return 0


def _session(ws: OpenWorkspace, agent: AgentPath, options: SshOptions, streams: SshStreams, diagnostics: BinaryIO,
             cancel: CancelToken) -> int:
    connection = open_agent_connection(ws, agent, options.user or ws.record.remote_user or "root",
                                       stderr=diagnostics, cancel=cancel)
    end = None
    try:
        end = _run_channel(connection.transport, options, streams, cancel, ws.paths)
    finally:
        # Cancelled or failed: the driver is killing the agent's tree; wait (bounded) until that is done.
        connection.close(wait_for_tunnel=end is None)
    if end is None:
        raise Cancelled("cancelled", hint="the command's processes in the workspace were stopped")
    if end.exit_code is None and not end.signal:
        raise lost_session_error(ws, connection)
    return end.process_exit_code()


def _run_channel(transport: object, options: SshOptions, streams: SshStreams, cancel: CancelToken,
                 paths: WorkspacePaths) -> SessionEnd | None:
    with contextlib.ExitStack() as stack:
        pty = None
        stdin_fd = streams.stdin.fileno() if streams.stdin is not None else None
        if terminal.session_terminal(stdin_fd, options.command, options.tty, paths):
            fd: int = stdin_fd  # type: ignore[assignment]  # not None: wants_terminal checked
            stack.enter_context(terminal.raw_mode(fd, cancel.wait))  # first: what the user types from now on is kept
            columns, rows = terminal.size(fd)
            pty = PtyRequest(os.environ.get("TERM", "xterm-256color"), columns, rows)
        channel = open_session(transport, SessionRequest(options.command, dict(options.env), pty))
        if pty is not None:
            stack.enter_context(terminal.on_resize(fd, lambda c, r: channel.resize_pty(width=c, height=r)))
            if terminal.size(fd) != (pty.cols, pty.rows):  # resized before the handler was in place
                channel.resize_pty(*terminal.size(fd))
        return pump_until_end(channel, streams.stdin, streams.stdout_fd, streams.stderr_fd, cancel)
