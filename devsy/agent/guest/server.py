"""The SSH server over stdio: paramiko in server mode on the exec pipe, one Session per `exec`/`shell` request.

Authentication: every method succeeds, `none` included. The only way to reach this server is the stdin/stdout of a
process the host started through the driver's exec (as root); whoever can write to that pipe can already run any
command as any user in the guest, so a second authentication would add keys and prompts to manage but no security.
The agent never listens on a network port.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Optional

from . import forward
from .channel_requests import ARGV_REQUEST, parse_argv_request, reply
from .channel_buffer import ChunkedChannelBuffers
from .fastimport import import_paramiko
from .hostkey import load_or_create
from .kex_safe import KexSafeSends
from .pipe_socket import PipeSocket, enlarge_pipe
from .process import PtySpec, SessionSpec
from .session import Session
from .tuning import MAX_PACKET_SIZE, WINDOW_SIZE

paramiko = import_paramiko()
from paramiko.channel import Channel  # noqa: E402 - after the fast import above
from paramiko.common import MSG_CHANNEL_CLOSE, MSG_CHANNEL_REQUEST  # noqa: E402

log = logging.getLogger("devsy_agent.server")


def _text(value) -> str:
    # Names, commands and values are bytes on the wire; surrogateescape keeps non-UTF-8 bytes exact through exec.
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def _request_then_start(channel: Channel, message) -> None:
    """Handle a channel request, then start a session it created: only after the reply has been sent, so a fast
    command's exit status can never reach the client before the reply to its `exec` request. `signal` (RFC 4254
    6.9) and `argv@devsy` (channel_requests.py), which paramiko does not know, are handled here."""
    server = channel.transport.server_object
    start = message.packet.tell()
    name = message.get_text()
    if name == "signal" and isinstance(server, AgentServer):
        message.get_boolean()  # want_reply: never set for `signal`
        server.signal_session(channel, _text(message.get_text()))
        return
    if name == ARGV_REQUEST and isinstance(server, AgentServer):
        want_reply = message.get_boolean()
        ok = server.check_channel_argv_request(channel, message.get_binary())
        if want_reply:
            reply(channel, ok)
        server.start_pending(channel)
        return
    message.packet.seek(start)
    Channel._handle_request(channel, message)
    if isinstance(server, AgentServer):
        server.start_pending(channel)


def _close_then_forget(channel: Channel, message) -> None:
    """The client closed a channel: paramiko's handling, then the server forgets it (and ends what still serves it:
    devsy's exec sessions kill the exec of a channel whose client has gone)."""
    server = channel.transport.server_object if channel.transport is not None else None
    Channel._handle_close(channel, message)
    if isinstance(server, AgentServer):
        server.channel_closed(channel)


class _Transport(ChunkedChannelBuffers, KexSafeSends, paramiko.Transport):
    _channel_handler_table = dict(paramiko.Transport._channel_handler_table)
    _channel_handler_table[MSG_CHANNEL_REQUEST] = _request_then_start
    _channel_handler_table[MSG_CHANNEL_CLOSE] = _close_then_forget

    def _parse_channel_open(self, m) -> None:
        """A `direct-tcpip` open is answered from a thread of its own, once the guest's connection is made or has
        failed: a connect may take seconds, and this (the transport) thread carries every other channel."""
        start = m.packet.tell()
        kind = m.get_text()
        m.packet.seek(start)
        if kind != "direct-tcpip" or not isinstance(self.server_object, AgentServer):
            super()._parse_channel_open(m)
            return
        threading.Thread(target=self._open_forward, args=(m,), name="forward-open", daemon=True).start()

    def _open_forward(self, m) -> None:
        start = m.packet.tell()
        for read in (m.get_text, m.get_int, m.get_int, m.get_int):  # kind, sender channel, window, packet size
            read()
        host, port = _text(m.get_text()), m.get_int()
        m.packet.seek(start)
        self.server_object.prepare_forward(host, port)  # what check_channel_direct_tcpip_request, below, answers
        if not self._clear_to_send():
            return  # the connection ended meanwhile
        try:  # as paramiko's own sends from outside its thread: never in the middle of a key exchange
            super()._parse_channel_open(m)
        except Exception as exc:  # noqa: BLE001 - a connection that ended under it; nothing to answer any more
            log.debug("answering a forward's open failed: %s", exc)
        finally:
            self.clear_to_send_lock.release()

    def _clear_to_send(self) -> bool:
        """Hold clear_to_send_lock while no key exchange runs (paramiko's _send_user_message does the same)."""
        while self.active:
            self.clear_to_send.wait(0.1)
            self.clear_to_send_lock.acquire()
            if self.clear_to_send.is_set():
                return True
            self.clear_to_send_lock.release()
        return False

    def _queue_incoming_channel(self, channel: Channel) -> None:
        """A channel the client opened, now confirmed: a forward starts copying here. Others are queued as paramiko
        does: the queue holds the only strong reference to a session channel until its requests arrive (paramiko
        keeps channels in a weak dictionary, and a collected channel closes itself)."""
        server = self.server_object
        if isinstance(server, AgentServer) and server.start_forward(channel):
            return
        super()._queue_incoming_channel(channel)


class AgentServer(paramiko.ServerInterface):
    def __init__(self, workdir: str) -> None:
        self.username = ""
        self.workdir = workdir
        self._lock = threading.Lock()
        self._specs: dict = {}  # channel id -> SessionSpec collected from env/pty requests
        self._pending: dict = {}  # channel id -> Session to start once the reply is out
        self._sessions: dict = {}
        self._forwards: dict = {}  # channel id -> the guest's connection of a direct-tcpip channel being opened
        self._prepared = threading.local()  # the connection prepare_forward made, in the thread answering the open

    # -- authentication (see the module docstring) --------------------------------------------------------------
    def get_allowed_auths(self, username: str) -> str:
        return "none,publickey,password"

    def _accept(self, username: str) -> int:
        self.username = _text(username)
        return paramiko.AUTH_SUCCESSFUL

    def check_auth_none(self, username):
        return self._accept(username)

    def check_auth_password(self, username, password):
        return self._accept(username)

    def check_auth_publickey(self, username, key):
        return self._accept(username)

    # -- channels -------------------------------------------------------------------------------------------------
    def check_channel_request(self, kind, chanid):
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    # -- local port forwarding (`ssh -L`) -------------------------------------------------------------------------
    def prepare_forward(self, host: str, port: int) -> None:
        """Connect to a forward's destination, in the thread that then answers its open (_Transport._open_forward),
        so that a refused connection is the channel's open failure (OpenSSH: "connect failed")."""
        try:
            self._prepared.result = forward.connect(host, port)
        except OSError as exc:
            log.info("forward to %s:%d failed: %s", host, port, exc)
            self._prepared.result = None

    def check_channel_direct_tcpip_request(self, chanid, origin, destination):
        """The prepared connection's outcome; the copy starts once the channel exists (start_forward)."""
        sock, self._prepared.result = getattr(self._prepared, "result", None), None
        if sock is None:
            return paramiko.OPEN_FAILED_CONNECT_FAILED
        with self._lock:
            self._forwards[chanid] = sock
        return paramiko.OPEN_SUCCEEDED

    def start_forward(self, channel: Channel) -> bool:
        """Start copying if `channel` is a forward this server accepted; False for any other channel."""
        with self._lock:
            sock = self._forwards.pop(channel.get_id(), None)
        if sock is None:
            return False
        forward.join(channel, sock)
        return True

    def _spec(self, channel: Channel) -> SessionSpec:
        with self._lock:
            return self._specs.setdefault(channel.get_id(), SessionSpec(command=None, workdir=self.workdir))

    def check_channel_env_request(self, channel, name, value):
        self._spec(channel).env[_text(name)] = _text(value)
        return True

    def check_channel_pty_request(self, channel, term, width, height, pixelwidth, pixelheight, modes):
        self._spec(channel).pty = PtySpec(_text(term), width, height, pixelwidth, pixelheight)
        return True

    def check_channel_shell_request(self, channel):
        return self._queue(channel, None)

    def check_channel_exec_request(self, channel, command):
        return self._queue(channel, _text(command))

    def check_channel_argv_request(self, channel: Channel, payload: bytes) -> bool:
        """`devsy exec`'s argv@devsy: run an argv exactly (channel_requests.py)."""
        try:
            argv, workdir = parse_argv_request(payload)
        except ValueError as exc:
            log.warning("refusing an argv request: %s", exc)
            return False
        spec = self._spec(channel)
        with self._lock:
            if channel.get_id() in self._pending or channel.get_id() in self._sessions:
                return False  # one program per session channel: the one queued keeps its argv
            spec.argv, spec.workdir = argv, workdir
        return self._queue(channel, None)

    def check_channel_subsystem_request(self, channel, name):
        return False

    def check_channel_window_change_request(self, channel, width, height, pixelwidth, pixelheight):
        session = self._session(channel)
        return session is not None and session.resize(width, height, pixelwidth, pixelheight)

    def _queue(self, channel: Channel, command: Optional[str]) -> bool:
        spec = self._spec(channel)
        with self._lock:
            if channel.get_id() in self._pending or channel.get_id() in self._sessions:
                return False  # one program per session channel (RFC 4254 6.5)
            spec.command = command
            self._pending[channel.get_id()] = self.new_session(channel, spec)
        return True

    def new_session(self, channel: Channel, spec: SessionSpec):
        """The session that runs `spec` on `channel`: a process here (devsy's host-side server runs driver execs
        instead, devsy/ssh/exec_sessions.py)."""
        return Session(channel, self.username, spec)

    def start_pending(self, channel: Channel) -> None:
        with self._lock:
            session = self._pending.pop(channel.get_id(), None)
            if session is not None:
                self._sessions[channel.get_id()] = session
        if session is not None:
            session.start()

    def signal_session(self, channel: Channel, name: str) -> None:
        session = self._session(channel)
        if session is None:
            with self._lock:
                session = self._pending.get(channel.get_id())
        if session is not None and not session.deliver_signal(name):
            log.debug("signal %s for channel %d: nothing to signal", name, channel.get_id())

    def channel_closed(self, channel: Channel) -> None:
        """Forget a closed channel (a long-lived connection would otherwise keep every session it had). A session
        whose client closed the channel while its program runs is hung up, as it would be when the whole connection
        ends (hangup_all): nobody can read its output or end it any more."""
        with self._lock:
            self._specs.pop(channel.get_id(), None)
            self._forwards.pop(channel.get_id(), None)
            self._pending.pop(channel.get_id(), None)
            session = self._sessions.pop(channel.get_id(), None)
        if session is not None:
            session.hangup()  # nothing to do for one that has ended

    def _session(self, channel: Channel) -> Optional[Session]:
        with self._lock:
            return self._sessions.get(channel.get_id())

    def hangup_all(self) -> None:
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            session.hangup()


def serve_stdio(state_dir: str, workdir: str) -> int:
    """Serve one SSH connection on stdin/stdout until the client disconnects."""
    # stdout must carry SSH bytes only: keep private copies of both ends, and point fds 0/1 elsewhere so that nothing
    # else in this process (a stray print, a library warning) can write into the stream or read from it.
    ssh_in, ssh_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    for fd in (ssh_in, ssh_out):
        enlarge_pipe(fd)
    # Closing the write end tells the host the stream ended. The read end stays open until the process exits: the
    # transport thread may still be in select() on it, and a closed number could be reused by a new pipe.
    sock = PipeSocket(ssh_in, ssh_out, on_close=lambda: os.close(ssh_out))
    transport = _Transport(sock, default_window_size=WINDOW_SIZE, default_max_packet_size=MAX_PACKET_SIZE)
    transport.add_server_key(load_or_create(state_dir))
    server = AgentServer(workdir)
    try:
        transport.start_server(server=server)
    except (paramiko.SSHException, EOFError, OSError) as exc:
        # End of input before a banner is a client that went away (or was cancelled) before speaking: not news.
        quiet = isinstance(exc.__cause__ or exc.__context__, EOFError) or isinstance(exc, EOFError)
        log.log(logging.DEBUG if quiet else logging.WARNING, "SSH handshake failed: %s", exc)
        return 1
    transport.join()  # ends when the client disconnects or the stream closes
    server.hangup_all()
    return 0
