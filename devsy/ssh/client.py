"""devsy's SSH client: paramiko over the tunnel's socket, one session, raw bytes both ways.

The agent's host key is not verified: the stream runs inside the driver's exec pipe, which is already authenticated
by the host (see devsy/agent/guest/server.py), so there is no network peer to impersonate.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from devsy.agent.errors import AgentError
from devsy.errors import UsageError
from devsy.agent.guest.channel_requests import ArgvRefused, request_argv, send_signal
from devsy.agent.guest.fastimport import import_paramiko
from devsy.agent.guest.kex_safe import KexSafeSends
from devsy.agent.guest.tuning import CHANNEL_READ_SIZE, CIPHERS, HOST_KEY_TYPES, KEX, MAX_PACKET_SIZE, WINDOW_SIZE
from devsy.driver.base import CancelToken
from devsy.ssh.mux.protocol import exit_code_for
from devsy.stdin_pump import StdinPump, write_all

HANDSHAKE_TIMEOUT_S = 60.0
_JOIN_S = 5.0


@dataclass(frozen=True)
class PtyRequest:
    term: str
    cols: int
    rows: int


@dataclass
class SessionRequest:
    command: str | None  # None: the user's login shell (unless argv is given)
    env: dict[str, str] = field(default_factory=dict)
    pty: PtyRequest | None = None
    argv: list[str] | None = None  # `devsy exec`: this argv exactly, no shell, in `workdir` (argv@devsy)
    workdir: str = ""


@dataclass(frozen=True)
class SessionEnd:
    exit_code: int | None  # None: the channel closed without an exit status
    signal: str = ""

    def process_exit_code(self) -> int:
        """What `devsy ssh` exits with: the status, 128+n for a signal, 255 when the guest reported neither."""
        return exit_code_for(self.exit_code, self.signal)


def connect(sock: socket.socket, username: str) -> Any:
    """An authenticated paramiko Transport over `sock`."""
    paramiko = import_paramiko()
    transport = _client_transport_class()(sock, default_window_size=WINDOW_SIZE,
                                          default_max_packet_size=MAX_PACKET_SIZE)
    options = transport.get_security_options()
    options.ciphers = CIPHERS
    options.kex = KEX
    options.key_types = HOST_KEY_TYPES
    transport.start_client(timeout=HANDSHAKE_TIMEOUT_S)
    transport.auth_none(username)
    if not transport.is_authenticated():
        raise paramiko.SSHException(f"the agent did not accept user {username!r}")
    return transport


_TRANSPORT_CLASS: Any = None


def _client_transport_class() -> Any:
    """paramiko's Transport, plus `exit-signal` (paramiko clients only understand `exit-status`)."""
    global _TRANSPORT_CLASS
    if _TRANSPORT_CLASS is None:
        paramiko = import_paramiko()
        from paramiko.channel import Channel
        from paramiko.common import MSG_CHANNEL_FAILURE, MSG_CHANNEL_REQUEST

        from devsy.agent.guest.channel_buffer import ChunkedChannelBuffers

        def handle_request(channel: Any, message: Any) -> None:
            start = message.packet.tell()
            if message.get_text() == "exit-signal":
                message.get_boolean()  # want_reply: always false for exit-signal
                channel.transport.exit_signals[channel.get_id()] = message.get_text()
                channel.status_event.set()
                return
            message.packet.seek(start)
            Channel._handle_request(channel, message)

        def handle_failure(channel: Any, message: Any) -> None:
            # Marked before paramiko closes the channel: the waiter then knows the agent said no, which a closed
            # channel alone does not say (a dying connection closes every channel too).
            channel.request_refused = True
            Channel._request_failed(channel, message)

        class ClientTransport(ChunkedChannelBuffers, KexSafeSends, paramiko.Transport):
            _channel_handler_table = dict(paramiko.Transport._channel_handler_table)
            _channel_handler_table[MSG_CHANNEL_REQUEST] = handle_request
            _channel_handler_table[MSG_CHANNEL_FAILURE] = handle_failure

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self.exit_signals: dict[int, str] = {}

        _TRANSPORT_CLASS = ClientTransport
    return _TRANSPORT_CLASS


class SessionNotOpened(AgentError):
    """No channel could be opened, so no command ran: the session may be tried on a new connection."""

    kind = "session-not-opened"


def open_session(transport: Any, request: SessionRequest) -> Any:
    """A channel running the request's command (or shell), with its environment and optional pty."""
    channel = open_channel(transport, request)
    start_command(channel, request)
    return channel


def open_channel(transport: Any, request: SessionRequest) -> Any:
    """A channel with the request's environment and optional pty, its command not yet started (the SSH master tells
    its client `started` between the two, so a command that may have run is never retried)."""
    env = _wire_env(request.env)  # before the channel: a value that cannot be sent leaves nothing to close
    try:
        channel = transport.open_session(window_size=WINDOW_SIZE, max_packet_size=MAX_PACKET_SIZE,
                                         timeout=HANDSHAKE_TIMEOUT_S)
    except Exception as exc:  # the connection is gone (or refuses channels): nothing was started
        raise SessionNotOpened(f"the agent's connection is gone: {exc or type(exc).__name__}",
                               hint="retry; `devsy ssh` starts a new connection") from exc
    expired = None
    try:
        for name, value in env.items():
            channel.set_environment_variable(name, value)  # no answer is asked for: nothing to wait on
        if request.pty is not None:
            with _answer_deadline(channel) as expired:
                channel.get_pty(term=request.pty.term, width=request.pty.cols, height=request.pty.rows)
    except Exception as exc:
        channel.close()
        raise _refused(exc, expired) from exc
    return channel


def _wire_env(env: dict[str, str]) -> dict[bytes, bytes]:
    """The environment as the bytes it came from (os.fsencode, as for the command): paramiko encodes text as strict
    UTF-8, which refuses the surrogate escapes non-UTF-8 bytes arrive as; the agent decodes them back the same way
    (agent/guest/server.py)."""
    wire = {}
    for name, value in env.items():
        try:
            wire[os.fsencode(name)] = os.fsencode(value)
        except UnicodeEncodeError:
            # Only the name is said (repr escapes what cannot be printed): the error's own text quotes the value.
            raise UsageError(f"the value of environment variable {name!r} is not text that can be sent to the "
                             "workspace (it contains a lone surrogate code point)",
                             hint="set it to UTF-8 text (in --env, remoteEnv or the calling environment)") from None
    return wire


def start_command(channel: Any, request: SessionRequest) -> None:
    """Start the request's command (or the login shell) on a channel from open_channel."""
    with _answer_deadline(channel) as expired:
        try:
            if request.argv is not None:
                request_argv(channel, request.argv, request.workdir)
            elif request.command is None:
                channel.invoke_shell()
            else:
                channel.exec_command(os.fsencode(request.command))  # bytes: see _wire_env
        except ArgvRefused:
            channel.close()
            raise  # an agent older than this devsy: nothing ran, the caller may run the command another way
        except Exception as exc:
            channel.close()
            raise _refused(exc, expired) from exc


@contextlib.contextmanager
def _answer_deadline(channel: Any) -> Iterator[threading.Event]:
    """Bound paramiko's wait for the agent's answer to a channel request (pty, exec, shell, argv), which has no
    deadline: closing the channel ends that wait (paramiko raises "Channel closed"), so a timer closes it. The event
    it yields says the timer fired, so the error can say the agent did not answer rather than that it refused."""
    expired = threading.Event()
    settled = threading.Lock()  # held by whichever comes first: the timer, or the block's end

    def expire() -> None:
        if not settled.acquire(blocking=False):
            return  # the answer came first
        expired.set()
        # The waiter wakes as soon as the channel is marked closed, before its close message is sent, and may close
        # the whole connection meanwhile; or a key exchange may hold the close up. The message may then go nowhere.
        with contextlib.suppress(Exception):
            channel.close()
        channel.event.set()  # a channel that was closed already (so close() did nothing) still ends the wait

    timer = threading.Timer(HANDSHAKE_TIMEOUT_S, expire)
    timer.daemon = True
    timer.start()
    try:
        yield expired
    finally:
        timer.cancel()
        first = settled.acquire(blocking=False)
    if not first:  # the timer fired as the answer came: the channel is closed, so this is no success
        raise _refused(TimeoutError(), expired)


def _refused(exc: Exception, expired: threading.Event | None = None) -> AgentError:
    if expired is not None and expired.is_set():
        return AgentError(f"the agent did not answer the session's request within {HANDSHAKE_TIMEOUT_S:g}s",
                          hint="the workspace may be overloaded or its agent stuck; retry, and if it persists set "
                               "DEVSY_AGENT_LOG=/tmp/agent.log and read that file in the workspace")
    # paramiko's SSHException, or EOFError/OSError when the stream died meanwhile
    return AgentError(f"the agent refused or dropped the session: {exc or type(exc).__name__}",
                      hint="retry; if it persists, set DEVSY_AGENT_LOG=/tmp/agent.log and read that file in the "
                           "workspace")


def session_end(channel: Any) -> SessionEnd:
    """The exit status or signal, once the channel has ended (call after its output reached end of file)."""
    signal_name = channel.transport.exit_signals.get(channel.get_id(), "") if channel.transport else ""
    if signal_name:
        return SessionEnd(None, signal_name)
    return SessionEnd(channel.exit_status if channel.exit_status_ready() and channel.exit_status >= 0 else None)


def pump_channel_output(channel: Any, fd: int, stderr: bool, on_broken_pipe: Callable[[], None], *,
                        close_fd: bool = False) -> threading.Thread:
    """A thread copying the channel's stdout (or stderr) to `fd` until end of file, byte for byte; with `close_fd`
    it closes `fd` when done (so the number cannot be reused under a write that is still blocked)."""
    receive = channel.recv_stderr if stderr else channel.recv

    def run() -> None:
        try:
            while True:
                data = receive(CHANNEL_READ_SIZE)
                if not data:
                    return
                try:
                    write_all(fd, data)
                except BrokenPipeError:
                    on_broken_pipe()  # our reader went away: stop, as OpenSSH does, by closing the channel
                    return
        finally:
            if close_fd:
                os.close(fd)

    thread = threading.Thread(target=run, name=f"devsy-ssh-{'stderr' if stderr else 'stdout'}", daemon=True)
    thread.start()
    return thread


def pump_until_end(channel: Any, stdin: BinaryIO | None, stdout_fd: int, stderr_fd: int, cancel: CancelToken, *,
                   owns_fds: bool = False, on_cancel: Callable[[Any], None] | None = None,
                   kill_on_broken_pipe: bool = False) -> SessionEnd | None:
    """Copy `stdin` into the session and its output to the descriptors until it ends; None when cancelled.

    The session ends as sshd ends it: when the command has exited (its status or signal arrived), not merely when its
    output closed (`exec >/dev/null; sleep 9`); the channel closing or a cancellation also ends it. With `owns_fds`,
    stdin and the output descriptors are closed by the threads using them, once they are done with them.
    `on_cancel(channel)` ends a cancelled session (the SSH master: the agent kills the tree). With
    `kill_on_broken_pipe` (`devsy exec`, whose commands never outlive it), a reader gone from the output has the
    agent kill the command's tree, as the driver's exec does, rather than only hang it up.
    """
    outputs_done = threading.Event()
    unsubscribe = [cancel.on_cancel(outputs_done.set), cancel.on_cancel(channel.status_event.set)]
    broken_pipe = threading.Event()

    def on_broken_pipe() -> None:
        # Whoever reads our output has gone (`devsy ssh ... | head -1`): end the session as OpenSSH does, by closing
        # the channel; the remote command then gets SIGPIPE on its next write.
        broken_pipe.set()
        if kill_on_broken_pipe:
            # Before the close, on the same connection: the agent handles them in order. A hang-up alone would
            # leave a command that ignores SIGHUP, and its children outside its process group, running.
            with contextlib.suppress(Exception):  # the connection may be gone too: then the agent hangs it all up
                send_signal(channel, "KILL")
        channel.close()

    outputs = [pump_channel_output(channel, stdout_fd, False, on_broken_pipe, close_fd=owns_fds),
               pump_channel_output(channel, stderr_fd, True, on_broken_pipe, close_fd=owns_fds)]
    threading.Thread(target=lambda: ([t.join() for t in outputs], outputs_done.set()), daemon=True).start()
    pump = None
    if stdin is not None:
        # A memoryview lets paramiko cut the chunk into packets without copying the rest each time.
        pump = StdinPump(stdin, lambda data: channel.sendall(memoryview(data)), channel.shutdown_write,
                         owns_source=owns_fds)
        pump.start()
    else:
        channel.shutdown_write()
    try:
        outputs_done.wait()
        # Input keeps flowing meanwhile: a command may close its output and go on reading.
        channel.status_event.wait()  # set by the status, the channel's close, the connection's end, or a cancel
    finally:
        for undo in unsubscribe:
            undo()
        if pump is not None:
            pump.stop()
    if cancel.is_cancelled() and on_cancel is not None:
        on_cancel(channel)
        for thread in outputs:
            thread.join(_JOIN_S)
    if pump is not None and owns_fds:
        pump.join(_JOIN_S)  # stopped: it returns at once, or as soon as a send into the closed channel fails
    if cancel.is_cancelled():
        return None
    if broken_pipe.is_set():
        return SessionEnd(None, "PIPE")  # like a pipeline member killed by SIGPIPE: 141
    return session_end(channel)
