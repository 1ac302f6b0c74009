"""Exec sessions: `devsy ssh` in a guest that cannot run the agent (no python3), served by an SSH server on the host.

The host runs the agent's own SSH server (devsy/agent/guest/server.py) on its end of the stream, and each session
channel becomes one driver exec of the user's shell in the guest. So the guest needs a POSIX shell and the command,
nothing else; every devsy SSH client (devsy ssh, the SSH master, OpenSSH through ProxyCommand) is unchanged.

A terminal comes from the guest's util-linux `script` where it has one (exec_terminal.py); elsewhere (busybox) a pty
request is refused, as sshd refuses one it cannot give (OpenSSH then goes on without one). Signals other than KILL
are refused: the driver can only kill a command's whole tree, which is what a cancelled `devsy ssh` asks for. Local port forwarding (`ssh -L`) is one driver exec per connection of a connector in the guest: bash's
/dev/tcp, else `nc`. Unlike the agent's, a destination that refuses is not reported as the channel's open failure
(the exec starts after the channel is confirmed): the channel closes at once and the connector's message goes to
the tunnel's stderr.
"""

from __future__ import annotations

import contextlib
import io
import logging
import secrets
import threading
from typing import Any, BinaryIO

from devsy.agent.guest.channel_requests import send_exit_signal
from devsy.agent.guest.fastimport import import_paramiko
from devsy.agent.guest.hostkey import load_or_create
from devsy.agent.guest.pipe_socket import PipeSocket
from devsy.agent.guest.process import SessionSpec
from devsy.agent.guest.server import AgentServer, _Transport
from devsy.agent.guest.tuning import MAX_PACKET_SIZE, WINDOW_SIZE
from devsy.devcontainer.session_env import UNSET_REQUEST, SessionEnv, unset_argv
from devsy.driver.base import CancelToken, Driver, ExecRequest, ExecResult
from devsy.errors import DevsyError
from devsy.ssh.exec_terminal import resize_argv, under_terminal
from devsy.ssh.tunnel import GatedInput

paramiko = import_paramiko()
log = logging.getLogger("devsy.ssh.exec_sessions")

# How long the end of the connection waits for its sessions' execs to end (each is bounded by its driver: a
# cancelled exec is killed and drained within the driver's own bounds).
SESSIONS_JOIN_S = 20.0

# The session's process, run by the driver as the session's user: the user's shell from /etc/passwd (as sshd starts
# it), HOME/USER/LOGNAME/SHELL set, started in the workspace folder (else the home, else /). Arguments: user,
# folder, "login", "command" (then the command) or "words" (then the argv to exec: a session under a terminal,
# exec_terminal.py). POSIX sh only: busybox ash and dash run it as bash does.
_LAUNCH = r'''n=$1 w=$2 m=$3; shift 3
h=/ s=/bin/sh
if [ -r /etc/passwd ]; then
  while IFS=: read -r pn _ pi _ _ ph ps; do
    if [ "$pn" = "$n" ] || [ "$pi" = "$n" ]; then n=$pn h=${ph:-/} s=${ps:-/bin/sh}; break; fi
  done < /etc/passwd
fi
[ -x "$s" ] || s=/bin/sh
export HOME="$h" USER="$n" LOGNAME="$n" SHELL="$s"
cd "$w" 2>/dev/null || cd "$h" 2>/dev/null || cd /
if [ "$m" = login ]; then exec "$s" -l; fi
if [ "$m" = words ]; then exec "$@"; fi
exec "$s" -c "$1"'''


def session_argv(user: str, workdir: str, command: str | None, words: list[str] | None = None) -> list[str]:
    """The exec argv of one session: `command` (None: a login shell) through the user's shell, or `words` run as
    they are once the user's environment is set up."""
    mode = ["words", *words] if words is not None else ["login"] if command is None else ["command", command]
    return ["/bin/sh", "-c", _LAUNCH, "devsy-session", user, workdir, *mode]


# The connector of a forwarded connection (arguments: host, port). bash's /dev/tcp first: Debian images have bash
# (Essential) but no nc; busybox images have nc. The connection ends when the destination closes it (the copy
# towards it is then stopped). bash cannot half-close a socket, so a client's end of input reaches the destination
# only as the end of the connection: a protocol that waits for it before replying is not served through bash. (fd 4:
# a background job's stdin is /dev/null unless it names another descriptor.)
_CONNECT = r'''h=$1 p=$2
if command -v bash >/dev/null 2>&1; then
  exec bash -c 'exec 3<>"/dev/tcp/$0/$1" 4<&0 || exit 111; cat <&4 >&3 & w=$!; cat <&3; kill "$w" 2>/dev/null
    exit 0' "$h" "$p"
fi
if command -v nc >/dev/null 2>&1; then exec nc "$h" "$p"; fi
echo "the image has neither bash nor nc to connect to $h:$p" >&2
exit 127'''


def connect_argv(host: str, port: int) -> list[str]:
    return ["/bin/sh", "-c", _CONNECT, "devsy-forward", host, str(port)]


def session_environment(base: SessionEnv, requested: dict[str, str]) -> SessionEnv:
    """A session's env: `base` (the connection's remoteEnv, for OpenSSH) under the session's env requests, whose
    UNSET_REQUEST names what to remove (see devsy/devcontainer/session_env.py)."""
    explicit = {name: value for name, value in requested.items() if name != UNSET_REQUEST}
    unset = [*base.unset, *(name for name in requested.get(UNSET_REQUEST, "").split("\n") if name)]
    return SessionEnv(base.under(explicit), tuple(dict.fromkeys(n for n in unset if n not in explicit)))


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
    """A channel served by one driver exec, in a thread of its own; `cancel` kills the exec's tree."""

    def __init__(self, channel: Any, name: str) -> None:
        self.channel = channel
        self.cancel = CancelToken()
        self._thread = threading.Thread(target=self._run, name=f"{name}-{channel.get_id()}", daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def active(self) -> bool:
        """Not yet started, or running."""
        return self._thread.ident is None or self._thread.is_alive()

    def join(self, timeout: float) -> bool:
        """Whether it has ended (or never started), after waiting up to `timeout`."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()


class ExecSession(_ChannelExec):
    """One session channel run as one driver exec (the interface AgentServer expects of a session)."""

    def __init__(self, server: ExecSessionServer, channel: Any, username: str, spec: SessionSpec) -> None:
        super().__init__(channel, "exec-session")
        self.server, self.username, self.spec = server, username, spec
        self._nonce = secrets.token_hex(8)
        self._resizer = _Resizer(server, self._nonce, self.cancel) if spec.pty is not None else None


    def resize(self, cols: int, rows: int, width_px: int, height_px: int) -> bool:
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
        values, words = dict(env.values), None
        if self.spec.pty is not None:  # accepted only where the guest has `script` (check_channel_pty_request)
            values["TERM"] = self.spec.pty.term or values.get("TERM", "xterm")
            words = under_terminal(self.server.terminal, self._nonce, self.spec.pty.cols, self.spec.pty.rows,
                                   self.spec.command)
        stdin = channel_input(self.channel)
        request = ExecRequest(
            argv=unset_argv(session_argv(self.username, self.spec.workdir, self.spec.command, words), env.unset),
            stdin=stdin, owns_stdin=True,  # type: ignore[arg-type]
            stdout=ChannelOutput(self.channel, stderr=False),  # type: ignore[arg-type]
            stderr=ChannelOutput(self.channel, stderr=True),  # type: ignore[arg-type]
            user=self.username, env=values, cancel=self.cancel)
        try:
            result = self.server.driver.exec(self.server.workspace_id, request)
        except DevsyError as exc:
            # No exit status: the client reports a lost session and asks the workspace's state why.
            log.info("session %d: the exec failed: %s", self.channel.get_id(), exc.message)
            self.channel.close()
            return
        finally:
            stdin.dispose()
        self._finish(result)

    def _finish(self, result: ExecResult) -> None:
        try:
            if self.cancel.is_cancelled():
                send_exit_signal(self.channel, "KILL")  # what the agent reports for a tree it killed
            elif result.signal:
                send_exit_signal(self.channel, result.signal.removeprefix("SIG"))
            else:
                self.channel.send_exit_status(result.exit_code)
            self.channel.shutdown_write()
            self.channel.close()
        except (OSError, EOFError) as exc:
            log.debug("could not report the exit status: %s", exc)


class ExecForward(_ChannelExec):
    """One forwarded connection (`ssh -L`): the channel is the stdin and stdout of a connector in the guest."""

    def __init__(self, server: ExecSessionServer, channel: Any, host: str, port: int) -> None:
        super().__init__(channel, "exec-forward")
        self.server, self.host, self.port = server, host, port


    def _run(self) -> None:
        stdin, errors = channel_input(self.channel), io.BytesIO()
        request = ExecRequest(argv=connect_argv(self.host, self.port), stdin=stdin, owns_stdin=True,  # type: ignore
                              stdout=ChannelOutput(self.channel, stderr=False), stderr=errors,  # type: ignore
                              user=self.server.username, cancel=self.cancel)
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
    """The agent's SSH server, with sessions and forwards run as driver execs, and no terminals."""

    def __init__(self, driver: Driver, workspace_id: str, workdir: str, base_env: SessionEnv, terminal: str = "",
                 report: Any = lambda message: None) -> None:
        super().__init__(workdir)
        self.driver, self.workspace_id, self.base_env, self.report = driver, workspace_id, base_env, report
        self.terminal = terminal  # the guest's util-linux `script`, or "": then no session gets a pty
        self._all: list[_ChannelExec] = []
        self._all_lock = threading.Lock()
        self._destinations: dict[int, tuple[str, int]] = {}

    def check_channel_pty_request(self, channel: Any, term: Any, width: int, height: int, pixelwidth: int,
                                  pixelheight: int, modes: Any) -> bool:
        return bool(self.terminal) and super().check_channel_pty_request(channel, term, width, height, pixelwidth,
                                                                          pixelheight, modes)

    def new_session(self, channel: Any, spec: SessionSpec) -> ExecSession:
        session = ExecSession(self, channel, self.username, spec)
        self._track(session)
        return session

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
            self._all = [*(other for other in self._all if other.active()), item]  # drop finished ones

    def end_all(self, timeout: float) -> None:
        """Kill every session's command tree and wait (bounded) until their execs have returned."""
        with self._all_lock:
            sessions = list(self._all)
        for session in sessions:
            session.cancel.cancel()
        for session in sessions:
            session.join(timeout)


class ExecSessionTunnel:
    """The host-side counterpart of AgentTunnel (devsy/ssh/tunnel.py): serves one SSH connection on `read_fd` /
    `write_fd` in this process, with the same attributes the callers read (result, error, output_seen, cancel)."""

    def __init__(self, driver: Driver, workspace_id: str, *, read_fd: int, write_fd: int, host_key_dir: str,
                 workdir: str, cancel: CancelToken, stderr: BinaryIO, terminal: str = "",
                 base_env: SessionEnv | None = None, on_end: Any = lambda: None) -> None:
        self.server = ExecSessionServer(driver, workspace_id, workdir, base_env or SessionEnv({}), terminal=terminal,
                                        report=lambda message: _report(stderr, message))
        self._read_fd, self._write_fd, self._host_key_dir = read_fd, write_fd, host_key_dir
        self.cancel, self.on_end = cancel, on_end
        self.result: ExecResult | None = None
        self.error: BaseException | None = None
        self.output_seen = True  # nothing here can fail before speaking SSH the way a missing agent does
        self._thread = threading.Thread(target=self.run, name="devsy-exec-sessions", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

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
