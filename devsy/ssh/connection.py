"""One SSH connection to a workspace's agent: driver.exec of `ssh-server --stdio`, with paramiko on top.

Both `devsy ssh` paths use it: the direct one (one connection per command) and the SSH master (one long-lived
connection per user, many sessions; see mux/master.py).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from devsy.agent.errors import AgentError, AgentUnsupported
from devsy.agent.guest.pipe_socket import PipeSocket
from devsy.agent.install import install_agent, install_agent_or_exec_sessions
from devsy.agent.note import read_note
from devsy.workspace.operations import OpenWorkspace
from devsy.driver.base import CancelToken
from devsy.errors import Cancelled, DevsyError
from devsy.progress import Progress
from devsy.ssh.client import connect
from devsy.ssh.tunnel import AgentTunnel, Tunnel

if TYPE_CHECKING:
    from devsy.devcontainer.session_env import SessionEnv
    from devsy.ssh.exec_sessions import ExecSessionTunnel
from devsy.workspace.lock import read_holder

AGENT_LOG_ENV = "DEVSY_AGENT_LOG"
# After the connection ended or was cancelled, the tunnel ends within the driver's own bounds (kill + drain).
TUNNEL_JOIN_S = 20.0
_TRANSPORT_JOIN_S = 5.0
_SOCKET_BUFFER = 4 * 1024 * 1024
_LOST_JOIN_S = 5.0
_SETTLE_CHECKS, _SETTLE_PAUSE_S = 8, 0.25  # up to 2 s for the engine to report a killed instance's end


class AgentPath:
    """Where the agent is in the guest: from the note `devsy up` wrote, delivered again when it is missing; or that
    the guest cannot run it, and its sessions are exec sessions (devsy/ssh/exec_sessions.py)."""

    def __init__(self, ws: OpenWorkspace, progress: Progress, cancel: CancelToken) -> None:
        self._ws, self._progress, self._cancel = ws, progress, cancel
        self._note = read_note(ws.paths)
        self.guest_path = self._note.guest_path if self._note is not None else ""

    def exec_sessions(self) -> bool:
        """Whether sessions are exec sessions; without a note, the agent is delivered now (or found unable to run)."""
        if self._note is None:
            self._note = install_agent_or_exec_sessions(self._ws.driver, self._ws.record.id, self._ws.paths,
                                                        self._progress, cancel=self._cancel)
            self.guest_path = self._note.guest_path
        return self._note.exec_sessions

    def get(self) -> str:
        return self.guest_path or self.redeliver()

    def redeliver(self) -> str:
        ws = self._ws
        self.guest_path = install_agent(ws.driver, ws.record.id, ws.paths, self._progress,
                                        cancel=self._cancel).guest_path
        return self.guest_path


def server_args(ws: OpenWorkspace) -> list[str]:
    args = ["ssh-server", "--stdio", "--workdir", ws.record.workspace_folder]
    if os.environ.get(AGENT_LOG_ENV):
        args += ["--log", os.environ[AGENT_LOG_ENV]]  # a path in the guest, for debugging the agent
    return args


@dataclass
class AgentConnection:
    transport: Any  # paramiko Transport, authenticated
    tunnel: Tunnel
    _sock: socket.socket
    ended: threading.Event  # set when the agent's exec has ended

    def alive(self) -> bool:
        return bool(self.transport.is_active()) and not self.ended.is_set()

    def close(self, *, wait_for_tunnel: bool) -> None:
        """End the connection. The agent sees end of input and exits by itself; after a cancellation the driver is
        killing its tree instead, and `wait_for_tunnel` waits (bounded) until that is done."""
        # Shut the socket down first: paramiko's transport thread then sees end of stream at once instead of at its
        # next 0.1 s poll.
        shutdown(self._sock)
        self.transport.close()
        self.transport.join(_TRANSPORT_JOIN_S)  # it saw end of stream at once; then its descriptor may be closed
        self._sock.close()
        if wait_for_tunnel:
            self.tunnel.join(TUNNEL_JOIN_S)


def open_agent_connection(ws: OpenWorkspace, agent: AgentPath, user: str, *, stderr: BinaryIO, cancel: CancelToken,
                          on_end: Callable[[], None] = lambda: None) -> AgentConnection:
    """Start the agent through the driver and complete the SSH handshake as `user`; `on_end` runs when the agent's
    exec has ended."""
    ours, theirs = socket.socketpair()
    for sock in (ours, theirs):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
    ended = threading.Event()

    def tunnel_ended() -> None:
        _close_tunnel_end(theirs)
        ended.set()
        on_end()

    tunnel: Tunnel
    if agent.exec_sessions():
        tunnel = exec_session_tunnel(ws, read_fd=theirs.fileno(), write_fd=theirs.fileno(), cancel=cancel,
                                     stderr=stderr, on_end=tunnel_ended)
    else:
        tunnel = AgentTunnel(ws.driver, ws.record.id, agent.get(), server_args(ws), input_fd=theirs.fileno(),
                             write_output=theirs.sendall, on_end=tunnel_ended, stderr=stderr, cancel=cancel,
                             redeliver=agent.redeliver)
    tunnel.start()  # the agent starts in the guest while we import paramiko here
    try:
        stream = PipeSocket(ours.fileno(), ours.fileno(), on_close=lambda: shutdown(ours))
        transport = connect(stream, user)
    except Exception as exc:  # paramiko raises SSHException, EOFError or socket errors for a dead stream
        shutdown(ours)
        ours.close()
        tunnel.join(TUNNEL_JOIN_S)
        raise_for_tunnel(tunnel, ws.record.id)
        raise AgentError(f"the SSH handshake with the agent in workspace {ws.record.id} failed: {exc}",
                         hint=f"retry; if it persists, run with {AGENT_LOG_ENV}=/tmp/agent.log set and read that "
                              "file in the workspace") from exc
    return AgentConnection(transport, tunnel, ours, ended)


def exec_session_tunnel(ws: OpenWorkspace, *, read_fd: int, write_fd: int, cancel: CancelToken, stderr: BinaryIO,
                        base_env: SessionEnv | None = None, on_end: Callable[[], None] = lambda: None,
                        ) -> ExecSessionTunnel:
    """The host-side SSH server of a workspace with exec sessions; its host key is kept in the workspace's folder."""
    from devsy.ssh.exec_sessions import ExecSessionTunnel  # paramiko's server side: only this path needs it

    note = read_note(ws.paths)
    return ExecSessionTunnel(ws.driver, ws.record.id, read_fd=read_fd, write_fd=write_fd,
                             host_key_dir=str(ws.paths.root), workdir=ws.record.workspace_folder, cancel=cancel,
                             stderr=stderr, terminal=note.terminal if note is not None else "", base_env=base_env,
                             on_end=on_end)


def raise_for_tunnel(tunnel: Tunnel, workspace_id: str) -> None:
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


class SessionLost(AgentError):
    """A session ended without an exit status: the connection to the agent broke under it."""

    kind = "session-lost"
    exit_code = 255  # what OpenSSH exits with when its connection is lost


def lost_session_error(ws: OpenWorkspace, connection: AgentConnection, *, master_exiting: bool = False) -> SessionLost:
    """What ended a session that got no exit status on `connection`, as far as the workspace's state tells (both
    `devsy ssh` paths). `master_exiting`: the SSH master ended it, asked to exit by `devsy stop`/`delete`/`up
    --recreate`."""
    workspace_id = ws.record.id
    unknown = "the command's outcome is unknown"
    if master_exiting or _changing_command(ws):
        return exiting_session_error(ws)
    # The agent's exec ends with the instance (a kill, a removal): once the driver has seen it end, the instance's
    # new state is what the driver reports, not the state it had a moment before.
    connection.tunnel.join(_LOST_JOIN_S)
    try:
        found = _settled_state(ws)
    except DevsyError as exc:  # the provider itself is gone, say: that is what ended the session
        return SessionLost(f"the connection to the agent in workspace {workspace_id} was lost during the session, "
                           f"and its provider cannot tell the workspace's state ({exc.message}); {unknown}",
                           hint=f"check the provider, then `devsy status {workspace_id}`")
    if found is None or not ws.paths.record.exists():
        return SessionLost(f"workspace {workspace_id} was deleted during the session (its instance is gone); "
                           f"{unknown}", hint=f"create it again with `devsy up ... --id {workspace_id}`")
    if not found.running:
        return SessionLost(f"workspace {workspace_id} stopped during the session; {unknown}",
                           hint=f"start it with `devsy start {workspace_id}` and run the command again")
    return SessionLost(f"the connection to the agent in workspace {workspace_id} was lost during the session (the "
                       f"agent or the provider's exec of it ended); {unknown}",
                       hint=f"run the command again; if it repeats, run with {AGENT_LOG_ENV}=/tmp/agent.log set "
                            "and read that file in the workspace")


def exiting_session_error(ws: OpenWorkspace) -> SessionLost:
    """What ended a session that the SSH master ended on its way out, asked to exit by `devsy stop`/`delete`/`up
    --recreate` (named when it still holds the workspace's lock)."""
    workspace_id = ws.record.id
    changer = _changing_command(ws) or ("a command that stops, deletes or recreates the workspace (`devsy stop`, "
                                        "`delete` or `up --recreate`)")
    return SessionLost(f"the session in workspace {workspace_id} was ended by {changer}; the command's outcome is "
                       "unknown", hint=f"see `devsy status {workspace_id}`; run the command again once the workspace "
                                       "runs")


def _changing_command(ws: OpenWorkspace) -> str:
    """"`devsy delete W` (pid N)" when a live devsy command holds the workspace's lock, else ""."""
    holder = read_holder(ws.paths.lock_holder)
    if holder is None:
        return ""
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return ""  # a stale note
    except PermissionError:
        pass  # alive, another user's
    return f"`{holder.command}` (pid {holder.pid})"


def _settled_state(ws: OpenWorkspace) -> Any:
    """The instance as the driver reports it once its state has settled. An engine may report an instance's end a
    moment after the ends of its execs (Docker: the kill of a container), so "running" is checked again for a
    bounded moment; this runs only after a session was lost."""
    pause = threading.Event()  # never set: only paces the re-checks
    found = ws.driver.find(ws.record.id)
    for _ in range(_SETTLE_CHECKS):
        if found is None or not found.running:
            break
        pause.wait(_SETTLE_PAUSE_S)
        found = ws.driver.find(ws.record.id)
    return found


def _close_tunnel_end(sock: socket.socket) -> None:
    """The agent's exec has ended: paramiko must see end of stream, and the socket is ours to close."""
    shutdown(sock)
    sock.close()


def shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
