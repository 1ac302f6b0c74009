"""Exec sessions: `devsy ssh` in a guest that cannot run the agent (no python3), served by an SSH server on the host.

The host runs the agent's own SSH server (devsy/agent/guest/server.py) on its end of the stream, and each session
channel becomes one driver exec of the user's shell in the guest. So the guest needs a POSIX shell and the command,
nothing else; every devsy SSH client (devsy ssh, the SSH master, OpenSSH through ProxyCommand) is unchanged.

A terminal comes from the guest's util-linux `script`, else from its busybox telnetd (exec_terminal.py,
exec_telnet.py); where it has neither, a pty request is refused, as sshd refuses one it cannot give (OpenSSH then goes
on without one). Under a terminal a command killed by a signal is reported as exit status 128+N, not as the signal.
Signals other than KILL are refused: the driver can only kill a command's whole tree, which is what a cancelled
`devsy ssh` asks for.

Local port forwarding (`ssh -L`) is one driver exec per connection of a connector in the guest (exec_commands.py
_CONNECT). Unlike the agent's, a destination that refuses is not reported as the channel's open failure (the exec
starts after the channel is confirmed): the channel closes at once and the connector's message goes to the tunnel's
stderr. A session channel the client closes ends its exec (channel_closed).
"""

from __future__ import annotations

import contextlib
import io
import logging
import secrets
import threading
import time
from typing import Any, BinaryIO

from devsy.agent.guest.channel_requests import send_exit_signal
from devsy.agent.guest.fastimport import import_paramiko
from devsy.agent.guest.hostkey import load_or_create
from devsy.agent.guest.pipe_socket import PipeSocket
from devsy.agent.guest.process import SessionSpec
from devsy.agent.guest.server import AgentServer, _Transport
from devsy.agent.guest.tuning import MAX_PACKET_SIZE, WINDOW_SIZE
from devsy.devcontainer.session_env import SessionEnv
from devsy.driver.base import CancelToken, Driver, ExecRequest, ExecResult
from devsy.errors import DevsyError
from devsy.redaction import configured_secrets, redact_text
from devsy.ssh.exec_commands import CONNECT_ENV, connect_argv, session_environment, session_exec
from devsy.ssh.exec_telnet import LINGER_S, TelnetTerminal, telnet_words
from devsy.ssh.exec_terminal import resize_argv, telnet_busybox, under_terminal
from devsy.ssh.tunnel import GatedInput, Tunnel

paramiko = import_paramiko()
log = logging.getLogger("devsy.ssh.exec_sessions")

# How long the end of the connection waits for its sessions' execs to end (each is bounded by its driver: a
# cancelled exec is killed and drained within the driver's own bounds).
SESSIONS_JOIN_S = 20.0

def channel_input(channel: Any) -> GatedInput:
    """The exec's stdin: the channel's data until its end of file. The channel's descriptor is readable once data
    is buffered or the channel reached its end, so recv() then does not block; close() wakes a blocked read."""
    stdin = GatedInput(channel.fileno(), read=channel.recv)
    stdin.open_gate()
    return stdin


class ChannelOutput(io.RawIOBase):
    """The exec's stdout or stderr: bytes go to the channel untouched; a closed channel is a broken pipe, which makes
    the driver end the command instead of letting it write into nothing."""

    def __init__(self, channel: Any, *, stderr: bool) -> None:
        super().__init__()
        self._send = channel.sendall_stderr if stderr else channel.sendall

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:  # type: ignore[override]
        try:
            self._send(bytes(data))
        except (OSError, EOFError) as exc:  # paramiko raises socket.error for a closed channel
            raise BrokenPipeError(f"the session's channel is closed: {exc}") from exc
        return len(data)


class _Resizer:
    """Sets a session's terminal size in the guest, one exec at a time, always to the latest size asked for."""

    def __init__(self, server: ExecSessionServer, nonce: str, cancel: CancelToken) -> None:
        self._server, self._nonce, self._cancel = server, nonce, cancel
        self._lock = threading.Lock()
        self._pending: tuple[int, int] | None = None
        self._running = False

    def request(self, cols: int, rows: int) -> None:
        with self._lock:
            self._pending = (cols, rows)
            if self._running:
                return  # the running worker takes it next
            self._running = True
        threading.Thread(target=self._work, name="exec-session-resize", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                size, self._pending = self._pending, None
                if size is None or self._cancel.is_cancelled():
                    self._running = False
                    return
            # As the session's user: root without CAP_SYS_PTRACE (Docker's default) cannot open another user's
            # /proc/PID/fd entries.
            request = ExecRequest(argv=resize_argv(self._nonce, *size), stdout=io.BytesIO(), stderr=io.BytesIO(),
                                  user=self._server.username, cancel=self._cancel)
            try:
                self._server.driver.exec(self._server.workspace_id, request)
            except DevsyError as exc:
                log.info("resizing a session's terminal failed: %s", exc.message)


class _ChannelExec:
    """A channel served by one driver exec, in a thread of its own; `cancel` kills the exec's tree. The server
    forgets it when it ends (or when its client closes the channel first)."""

    def __init__(self, server: ExecSessionServer, channel: Any, name: str) -> None:
        self.server, self.channel = server, channel
        self.cancel = CancelToken()
        self._thread = threading.Thread(target=self._serve, name=f"{name}-{channel.get_id()}", daemon=True)

    def _serve(self) -> None:
        try:
            self._run()
        finally:
            self.server.forget(self)

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> bool:
        """Whether it has ended (or never started), after waiting up to `timeout`."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()


class ExecSession(_ChannelExec):
    """One session channel run as one driver exec (the interface AgentServer expects of a session)."""

    def __init__(self, server: ExecSessionServer, channel: Any, username: str, spec: SessionSpec) -> None:
        super().__init__(server, channel, "exec-session")
        self.username, self.spec = username, spec
        self._nonce = secrets.token_hex(8)
        # Under busybox telnetd the size travels in the session's input (made when it runs: a session may never
        # start); under `script` a resize is an exec of its own.
        self._busybox = telnet_busybox(server.terminal) if spec.pty is not None else ""
        self._telnet: TelnetTerminal | None = None
        self._size = (spec.pty.cols, spec.pty.rows) if spec.pty is not None else (0, 0)
        self._size_lock = threading.Lock()
        # After telnetd's exit marker its input is closed, which ends it; should its exec still not end, it is killed.
        self._linger = threading.Timer(LINGER_S, self.cancel.cancel)
        self._linger.daemon = True
        self._resizer = _Resizer(server, self._nonce, self.cancel) if spec.pty is not None and not self._busybox \
            else None

    def resize(self, cols: int, rows: int, width_px: int, height_px: int) -> bool:
        if self._busybox:
            with self._size_lock:
                self._size = (cols, rows)
                if self._telnet is not None:
                    self._telnet.resize(cols, rows)
            return True
        if self._resizer is None:
            return False  # a session without a terminal
        self._resizer.request(cols, rows)
        return True

    def hangup(self) -> None:
        """The client is gone: end the command's tree (sshd would hang up its process group)."""
        self.cancel.cancel()

    def deliver_signal(self, name: str) -> bool:
        if name != "KILL":
            return False  # a driver cannot name a signal; only the cancellation's tree kill is available
        self.cancel.cancel()
        return True

    def _run(self) -> None:
        env = session_environment(self.server.base_env, self.spec.env)
        words = None
        pty = self.spec.pty
        if pty is not None:  # accepted only where the guest has a terminal helper (check_channel_pty_request)
            env = SessionEnv({**env.values, "TERM": pty.term or env.values.get("TERM", "xterm")}, env.unset)
        stdin: GatedInput
        stdout: BinaryIO
        if self._busybox:
            with self._size_lock:
                self._telnet = TelnetTerminal(self.channel, ChannelOutput(self.channel, stderr=False), self._nonce,
                                              on_exit=self._linger.start)
                words = telnet_words(self._busybox, self._nonce, *self._size, self.spec.command)
            stdin, stdout = self._telnet.input, self._telnet.output  # type: ignore[assignment]
        else:
            if pty is not None:
                words = under_terminal(self.server.terminal, self._nonce, pty.cols, pty.rows, self.spec.command)
            stdin, stdout = channel_input(self.channel), ChannelOutput(self.channel, stderr=False)  # type: ignore
        argv, values = session_exec(self.username, self.spec.workdir, self.spec.command, env, words)
        request = ExecRequest(
            argv=argv,
            stdin=stdin, owns_stdin=True,  # type: ignore[arg-type]
            stdout=stdout,
            stderr=ChannelOutput(self.channel, stderr=True),  # type: ignore[arg-type]
            user=self.username, env=values, cancel=self.cancel)
        try:
            result = self.server.driver.exec(self.server.workspace_id, request)
        except DevsyError as exc:
            # No exit status: the client reports a lost session and asks the workspace's state why.
            log.info("session %d: the exec failed: %s", self.channel.get_id(), exc.message)
            self.channel.close()
            return
        except Exception as exc:  # untyped (an engine socket's OSError, a bug): the client must not wait for ever
            log.error("session %d: the exec failed: %s: %s", self.channel.get_id(), type(exc).__name__,
                      redact_text(str(exc), configured_secrets(values.values())))
            self.channel.close()
            return
        finally:
            self._linger.cancel()
            stdin.dispose()
            if self._telnet is not None:
                with contextlib.suppress(OSError):  # the client's channel may be gone
                    self._telnet.output.finish()
        self._finish(result)

    def _finish(self, result: ExecResult) -> None:
        try:
            if self._telnet is not None and self._telnet.status is not None:  # its command had ended
                self.channel.send_exit_status(self._telnet.status)
            elif self.cancel.is_cancelled():
                send_exit_signal(self.channel, "KILL")  # what the agent reports for a tree it killed
            elif result.signal:
                send_exit_signal(self.channel, result.signal.removeprefix("SIG"))
            else:
                if self._telnet is not None and result.exit_code == 255:  # its login program was killed
                    self.channel.sendall_stderr(b"devsy: the terminal session ended without its exit status\r\n")
                self.channel.send_exit_status(result.exit_code)
            self.channel.shutdown_write()
            self.channel.close()
        except (OSError, EOFError) as exc:
            log.debug("could not report the exit status: %s", exc)


class ExecForward(_ChannelExec):
    """One forwarded connection (`ssh -L`): the channel is the stdin and stdout of a connector in the guest."""

    def __init__(self, server: ExecSessionServer, channel: Any, host: str, port: int) -> None:
        super().__init__(server, channel, "exec-forward")
        self.host, self.port = host, port

    def _run(self) -> None:
        stdin, errors = channel_input(self.channel), io.BytesIO()
        request = ExecRequest(argv=connect_argv(self.host, self.port), stdin=stdin, owns_stdin=True,  # type: ignore
                              stdout=ChannelOutput(self.channel, stderr=False), stderr=errors,  # type: ignore
                              user=self.server.username, env=dict(CONNECT_ENV), cancel=self.cancel)
        try:
            result = self.server.driver.exec(self.server.workspace_id, request)
            if result.exit_code != 0 and not self.cancel.is_cancelled():
                message = errors.getvalue().decode("utf-8", "replace").strip()[-300:] or f"exit {result.exit_code}"
                self.server.report(f"the forwarded connection to {self.host}:{self.port} failed in the guest: "
                                   f"{message}")
        except DevsyError as exc:
            self.server.report(f"the forwarded connection to {self.host}:{self.port} failed: {exc.message}")
        finally:
            stdin.dispose()
            with contextlib.suppress(OSError, EOFError):
                self.channel.shutdown_write()
                self.channel.close()


class ExecSessionServer(AgentServer):
    """The agent's SSH server, with sessions and forwards run as driver execs, and terminals through the guest's
    `script` or busybox telnetd."""

    def __init__(self, driver: Driver, workspace_id: str, workdir: str, base_env: SessionEnv, terminal: str = "",
                 report: Any = lambda message: None) -> None:
        super().__init__(workdir)
        self.driver, self.workspace_id, self.base_env, self.report = driver, workspace_id, base_env, report
        self.terminal = terminal  # the guest's terminal helper (exec_terminal.py), or "": then no session gets a pty
        self._all: dict[int, _ChannelExec] = {}  # channel id -> what serves it, until the channel closes
        self._all_lock = threading.Lock()
        self._destinations: dict[int, tuple[str, int]] = {}

    def check_channel_pty_request(self, channel: Any, term: Any, width: int, height: int, pixelwidth: int,
                                  pixelheight: int, modes: Any) -> bool:
        return bool(self.terminal) and super().check_channel_pty_request(channel, term, width, height, pixelwidth,
                                                                          pixelheight, modes)

    def check_channel_argv_request(self, channel: Any, payload: bytes) -> bool:
        """Refused: `devsy exec` runs a driver exec itself where sessions are served here (cli/exec_command.py)."""
        return False

    def new_session(self, channel: Any, spec: SessionSpec) -> ExecSession:
        session = ExecSession(self, channel, self.username, spec)
        self._track(session)
        return session

    def prepare_forward(self, host: str, port: int) -> None:
        """Nothing to prepare here: the connection is made in the guest by the forward's exec (ExecForward), never
        from this host (whose network is not the guest's)."""

    def check_channel_direct_tcpip_request(self, chanid: int, origin: Any, destination: Any) -> int:
        with self._all_lock:
            self._destinations[chanid] = (str(destination[0]), int(destination[1]))
        return paramiko.OPEN_SUCCEEDED

    def start_forward(self, channel: Any) -> bool:
        with self._all_lock:
            destination = self._destinations.pop(channel.get_id(), None)
        if destination is None:
            return False
        forward = ExecForward(self, channel, *destination)
        self._track(forward)
        forward.start()
        return True

    def _track(self, item: _ChannelExec) -> None:
        with self._all_lock:
            self._all[item.channel.get_id()] = item

    def forget(self, item: _ChannelExec) -> None:
        with self._all_lock:
            if self._all.get(item.channel.get_id()) is item:
                del self._all[item.channel.get_id()]
        super().channel_closed(item.channel)  # the agent server's own records of the session

    # channel_closed (AgentServer's) hangs up a session whose client closed its channel: ExecSession.hangup kills the
    # exec's tree. A forward is left to end as its connection does: the data it was sent before the close is still
    # on its way to the destination, followed by the client's end of input.

    def end_all(self, timeout: float) -> None:
        """Kill every session's command tree and wait (bounded) until their execs have returned."""
        with self._all_lock:
            items = list(self._all.values())
        for item in items:
            item.cancel.cancel()
        deadline = time.monotonic() + timeout  # one bound for all of them: they end in parallel
        for item in items:
            item.join(max(0.0, deadline - time.monotonic()))


class ExecSessionTunnel(Tunnel):
    """The host-side counterpart of AgentTunnel (devsy/ssh/tunnel.py): serves one SSH connection on `read_fd` /
    `write_fd` in this process, with the same attributes the callers read (result, error, output_seen, cancel)."""

    def __init__(self, driver: Driver, workspace_id: str, *, read_fd: int, write_fd: int, host_key_dir: str,
                 workdir: str, cancel: CancelToken, stderr: BinaryIO, terminal: str = "",
                 base_env: SessionEnv | None = None, on_end: Any = lambda: None) -> None:
        self.server = ExecSessionServer(driver, workspace_id, workdir, base_env or SessionEnv({}), terminal=terminal,
                                        report=lambda message: _report(stderr, message))
        # output_seen: nothing here can fail before speaking SSH the way a missing agent does.
        super().__init__("devsy-exec-sessions", cancel, on_end, output_seen=True)
        self._read_fd, self._write_fd, self._host_key_dir = read_fd, write_fd, host_key_dir

    def run(self) -> None:
        transport = None
        unsubscribe = lambda: None  # noqa: E731
        try:
            stream = PipeSocket(self._read_fd, self._write_fd)
            transport = _Transport(stream, default_window_size=WINDOW_SIZE, default_max_packet_size=MAX_PACKET_SIZE)
            transport.add_server_key(load_or_create(self._host_key_dir))
            unsubscribe = self.cancel.on_cancel(lambda: self.server.end_all(0.0))
            try:
                transport.start_server(server=self.server)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                log.debug("SSH handshake failed: %s", exc)  # the client went away before speaking, or was cancelled
            else:
                self.cancel.on_cancel(transport.close)
                transport.join()  # until the client disconnects, the stream ends, or a cancellation closes it
            self.result = ExecResult(0)
        except BaseException as exc:  # reported by the caller after join(); a thread cannot raise to it
            self.error = exc
        finally:
            unsubscribe()
            self.server.end_all(SESSIONS_JOIN_S)  # nothing a session started outlives the connection
            if transport is not None:
                with contextlib.suppress(Exception):
                    transport.close()
            self.on_end()


def _report(stderr: BinaryIO, message: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        stderr.write(f"devsy: {message}\n".encode("utf-8", "replace"))
        stderr.flush()
