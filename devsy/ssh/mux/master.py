"""A workspace's SSH master: one long-lived paramiko connection per user to the agent, many sessions over it.

Started by the first `devsy ssh` or `devsy exec` that finds none (mux/spawn.py; "`devsy ssh`" below stands for
both), it serves sessions on its control socket (see mux/protocol.py) until it has been idle for DEVSY_SSH_PERSIST_S
seconds, until `devsy stop`/`delete` ask it to exit, or until its last connection to the agent ends (the workspace
stopped or went away). Why it exists: starting Python
and paramiko and an SSH handshake on both ends cost ~300 ms per command; a session on an open connection costs
one channel round trip.

    python -m devsy.ssh.mux.master --home H --workspace ID --ready-fd N

It reports its start on the ready descriptor as one JSON line: {"ok": true}, or the error (kind, message, hint,
exit code) that the starting `devsy ssh` then shows as its own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from collections.abc import Callable

import devsy.no_docker_ssh_transport  # noqa: F401  (first: before anything imports docker)
from devsy import termination
from devsy.agent.guest.channel_requests import ArgvRefused
from devsy.devcontainer.session_env import SessionEnv, ssh_env, workspace_session_env
from devsy.workspace.operations import OpenWorkspace, exec_target, open_workspace
from devsy.driver.base import CancelToken
from devsy.errors import DevsyError, WorkspaceNotFound
from devsy.progress import Progress
from devsy.redaction import REDACT_ENV, RedactingWriter, Redactor, configured_secrets
from devsy.ssh.client import PtyRequest, SessionNotOpened, SessionRequest, open_channel, pump_until_end, start_command
from devsy.ssh.connection import (AgentConnection, AgentPath, exiting_session_error, lost_session_error,
                                  open_agent_connection)
from devsy.ssh.mux.client_watch import ClientWatch, kill_session
from devsy.ssh.mux.driver_session import DriverCommand, driver_command, run_with_driver
from devsy.ssh.mux.protocol import (MessageStream, ProtocolError, agent_takes_user, master_address, peer_pid_checked,
                                    persist_seconds)
from devsy.ssh.mux.spawn import master_log
from devsy.workspace.record import load_record

log = logging.getLogger("devsy.ssh.master")
_CLOSE_WAIT_S = 20.0  # on exit, sessions that are ending get this long to send their last reply


class _Stderr:
    """Where the agent's stderr and our progress go: the starting `devsy ssh`'s stderr while we start, then our log.
    Takes bytes (the agent's stderr, through the redaction filter) and text (Progress)."""

    def __init__(self, startup_fd: int) -> None:
        self._fd = startup_fd
        self._lock = threading.Lock()

    def write(self, data: bytes | str) -> int:
        raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
        with self._lock, contextlib.suppress(OSError):
            os.write(self._fd, raw)
        return len(data)

    def flush(self) -> None:
        pass

    def switch_to_log(self) -> None:
        with self._lock:
            if self._fd != 2:
                os.close(self._fd)
                self._fd = 2


class Master:
    def __init__(self, ws: OpenWorkspace, stderr: _Stderr, cancel: CancelToken) -> None:
        self.ws = ws
        self.cancel = cancel  # SIGTERM while starting: the driver stops the agent it was starting
        self._agent = AgentPath(ws, Progress(stderr), self.cancel)  # type: ignore[arg-type]
        self._stderr = RedactingWriter(stderr, configured_secrets())  # type: ignore[arg-type]
        self._connections: dict[str, AgentConnection] = {}
        self._connect_lock = threading.Lock()  # one handshake at a time
        self._state = threading.Condition()  # guards _active and _idle_since; notified when a client is done
        self._active = 0
        self._idle_since = time.monotonic()
        # A plain flag, not an Event: SIGTERM's handler sets it, and a handler must take no lock (termination.py).
        self._exiting = False
        # The sessions the driver runs (argv sessions without the agent): they belong to no connection, so close()
        # cancels them itself. Guarded by _driver_lock, as is _closed, which refuses new ones.
        self._driver_sessions: set[CancelToken] = set()
        self._driver_lock = threading.Lock()
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()

    # -- connections to the agent -----------------------------------------------------------------------------------
    def connection(self, user: str) -> AgentConnection:
        with self._connect_lock:
            current = self._connections.get(user)
            if current is not None and current.alive():
                return current
            if current is not None:
                current.close(wait_for_tunnel=False)
            connection = open_agent_connection(self.ws, self._agent, user, stderr=self._stderr, cancel=self.cancel,
                                               on_end=self._wake)
            self._connections[user] = connection
            return connection

    def _any_alive(self) -> bool:
        with self._connect_lock:
            return any(c.alive() for c in self._connections.values())

    # -- the control socket -------------------------------------------------------------------------------------------
    def serve(self, listener: socket.socket, persist_s: float) -> None:
        """Accept clients until idle for `persist_s`, asked to exit, or every connection to the agent has ended."""
        accepting = True
        with self._state:
            self._idle_since = time.monotonic()  # not since __init__: connecting to the agent may have taken long
        while not self._exiting:
            with self._state:
                timeout = None if self._active else max(0.0, self._idle_since + persist_s - time.monotonic())
            ready, _, _ = select.select([listener, self._wake_r] if accepting else [self._wake_r], [], [], timeout)
            if not ready:
                log.info("idle for %gs: exiting", persist_s)
                return
            if self._wake_r in ready:
                os.read(self._wake_r, 4096)
                accepting = True  # a session ended: descriptors may be free again
            if listener in ready:
                try:
                    client, _ = listener.accept()
                except OSError as exc:  # out of descriptors: wait for a session to end rather than spin
                    log.warning("cannot accept a client: %s", exc)
                    accepting = False
                    continue
                with self._state:
                    self._active += 1  # counted here, so the checks below never miss a client being served
                threading.Thread(target=self._serve_client, args=(client,), daemon=True).start()
            with self._state:
                idle = self._active == 0
            if idle and not self._any_alive():
                log.info("no connection to the agent is left (the workspace stopped or went away): exiting")
                return

    def _serve_client(self, client: socket.socket) -> None:
        fds: list[int] = []
        try:
            peer_pid_checked(client)
            stream = MessageStream(client)
            message, fds = stream.receive(max_fds=3)
            op = message["op"] if message else ""
            if op == "session":
                session_fds, fds = fds, []
                self._session(stream, message, session_fds)  # type: ignore[arg-type]
            elif op == "ping":
                with self._connect_lock:
                    users = sorted(u for u, c in self._connections.items() if c.alive())
                stream.send({"op": "pong", "pid": os.getpid(), "users": users})
            elif op == "exit":
                log.info("asked to exit")
                self.request_exit()
                stream.send({"op": "bye"})
            elif op:
                stream.send({"op": "error", "kind": "usage", "message": f"unknown request {op!r}"})
        except (ProtocolError, OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("client dropped: %s", exc)
        finally:
            for fd in fds:
                os.close(fd)
            # shutdown, not only close: the session's watcher may be blocked reading this socket, and then close()
            # alone would neither wake it nor let the client see the end of the stream.
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            client.close()
            with self._state:
                self._active -= 1
                self._idle_since = time.monotonic()
                self._state.notify_all()
            self._wake()

    def _session(self, stream: MessageStream, message: dict, fds: list[int]) -> None:
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            raise ProtocolError(f"a session request with {len(fds)} descriptors, not 3")
        stdin_fd, stdout_fd, stderr_fd = fds
        if not message.get("stdin"):
            os.close(stdin_fd)
        # The client is followed from now on, not only once its command started: it may ping us (or leave, or
        # cancel) while we connect to the agent.
        watch = ClientWatch(stream)
        watch.start()
        watch.send(self._run(watch, message, stdin_fd if message.get("stdin") else None, stdout_fd, stderr_fd))

    def _run(self, watch: ClientWatch, message: dict, stdin_fd: int | None, stdout_fd: int, stderr_fd: int) -> dict:
        """Run one session; the descriptors are ours to close. By the reply, every copy into the client's stdout
        and stderr has ended and closed its descriptor (once `devsy ssh` exits, only its caller holds them)."""
        handed_over = False
        redact = _session_redactor(message)
        try:
            try:
                request, user, remote, explicit = self._request(message, lambda text: watch.send(
                    {"op": "warning", "message": redact(text)}))
                if self._by_driver(request, user):
                    command = driver_command(self.ws, request, user, explicit, remote)  # before the hand-over
                    handed_over = True
                    return self._run_by_driver(watch, command, stdin_fd, stdout_fd, stderr_fd, redact)
                connection = self.connection(user or "root")
                channel = open_channel(connection.transport, request)
            except SessionNotOpened as exc:
                return _error_reply(exc, redact, retry=True)
            except DevsyError as exc:
                return _error_reply(exc, redact)
            if watch.cancel.is_cancelled():
                log.warning("client dropped before its command started: not starting it")
                channel.close()
                return {"op": "end", "cancelled": True}
            try:
                watch.channel = channel
                watch.send({"op": "started"})  # from now on the command may run: the client must not retry
                try:
                    start_command(channel, request)
                except ArgvRefused:
                    # An agent older than argv sessions (a devsy upgrade since `up` delivered it): nothing ran.
                    log.info("the agent refuses argv sessions (delivered by an older devsy): the client runs the "
                             "driver's exec")
                    return {"op": "direct"}
                except DevsyError as exc:
                    return _error_reply(exc, redact)
                handed_over = True  # the session's threads close each descriptor when they are done with it
                stdin = os.fdopen(stdin_fd, "rb", buffering=0) if stdin_fd is not None else None
                end = pump_until_end(channel, stdin, stdout_fd, stderr_fd, watch.cancel, owns_fds=True,
                                     on_cancel=kill_session, kill_on_broken_pipe=request.argv is not None)
            except BaseException:
                kill_session(channel)  # the client is gone, or we failed: the command must not run on unattended
                raise
        finally:
            if not handed_over:
                for fd in (stdin_fd, stdout_fd, stderr_fd):
                    if fd is not None:
                        os.close(fd)
        if end is None:
            return {"op": "end", "cancelled": True}
        if end.exit_code is None and not end.signal:  # the connection to the agent broke under the session
            lost = lost_session_error(self.ws, connection, master_exiting=self._exiting)
            log.warning("a session ended without an exit status: %s", redact(lost.message))
            return _error_reply(lost, redact)
        return {"op": "end", "exit_code": end.exit_code, "signal": end.signal, "broken_pipe": end.signal == "PIPE"}

    def _run_by_driver(self, watch: ClientWatch, command: DriverCommand, stdin_fd: int | None, stdout_fd: int,
                       stderr_fd: int, redact: Callable[[str], str]) -> dict:
        """A session through the driver's exec (mux/driver_session.py; which ones: _by_driver); the descriptors are
        closed by the reply. Closing the master (`devsy stop`, `delete`) cancels it: the driver kills the command's
        tree, and the client hears why, as a session on the agent's connection tells it."""
        with self._driver_lock:
            closed = self._closed
            if not closed:
                self._driver_sessions.add(watch.cancel)
        try:
            if closed:
                for fd in (stdin_fd, stdout_fd, stderr_fd):
                    if fd is not None:
                        os.close(fd)
                return _error_reply(exiting_session_error(self.ws), redact)
            reply = run_with_driver(self.ws, command, stdin_fd, stdout_fd, stderr_fd, watch.cancel,
                                    started=lambda: watch.send({"op": "started"}))
        except DevsyError as exc:  # the driver's own message and exit status (a paused instance, say), as exec gives
            log.warning("a session's exec failed: %s", redact(exc.message))
            return _error_reply(exc, redact)
        except Exception as exc:  # untyped (an engine socket's OSError, a bug): the client must hear it, masked
            log.error("a session's exec failed: %s: %s", type(exc).__name__, redact(str(exc)))
            return _error_reply(DevsyError(f"running the command failed: {type(exc).__name__}: {exc}",
                                           hint="run the command again; if it repeats, read the workspace's "
                                                "ssh-master.log in the devsy home"), redact)
        finally:
            with self._driver_lock:
                self._driver_sessions.discard(watch.cancel)
        if reply.get("cancelled") and self._closed:
            return _error_reply(exiting_session_error(self.ws), redact)
        return reply

    def _by_driver(self, request: SessionRequest, user: str) -> bool:
        """Whether the session is this master's own driver exec rather than a channel of a connection. An argv
        session (`devsy exec`) is where the guest has no agent, or the user is a form only the engine reads (the
        record's remoteUser may be a bare uid). A session without a terminal is where the guest has no agent: it is
        one driver exec either way, and run here its bytes skip the SSH connection to the host-side exec-session
        server in this same process (ssh/exec_sessions.py), whose encryption both ways was most of their cost.
        A session with a terminal still goes through that server (it sets up the guest's terminal helper)."""
        if request.argv is not None:
            return self._agent.exec_sessions() or not agent_takes_user(user)
        return request.pty is None and self._agent.exec_sessions()

    def _request(self, message: dict,
                 warn: Callable[[str], None]) -> tuple[SessionRequest, str, SessionEnv, dict[str, str]]:
        """The session's request to the agent, the user it runs as, the workspace's session env and the client's
        --env, made here as `devsy ssh` and `devsy exec` without a master make theirs: the request's env is the
        workspace's remoteEnv (devcontainer.json re-read now, ${localEnv:...} from the client's environment) under
        the client's --env (returned apart too: a driver session applies the two itself); for an argv (`devsy
        exec`), the record's user and workspace folder unless given. The record is re-read too: a later `up` may have
        changed what it holds."""
        record = load_record(self.ws.paths)
        if record is None or record.uid != self.ws.record.uid:
            raise WorkspaceNotFound(f"workspace {self.ws.record.id} was deleted or recreated under this SSH master",
                                    hint="run the command again")
        ws = OpenWorkspace(self.ws.paths, record, self.ws.driver)
        explicit = _strings(message.get("env"), "env")
        user, argv, workdir, pty = str(message.get("user") or ""), message.get("argv"), "", message.get("pty")
        if argv is not None:
            if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
                raise ProtocolError("a session argv that is not a non-empty list of strings")
            user, workdir = exec_target(ws, user, str(message.get("workdir") or ""))
        remote = workspace_session_env(record, ws.paths, lambda: ws.driver, user,
                                       local_env=_strings(message.get("local_env"), "local_env"), warn=warn)
        request = SessionRequest(command=message.get("command"), env=ssh_env(remote, explicit), argv=argv,
                                 workdir=workdir,
                                 pty=PtyRequest(str(pty["term"]), int(pty["cols"]), int(pty["rows"])) if pty else None)
        return request, user or record.remote_user, remote, explicit

    def wait_for_sessions(self, timeout: float) -> None:
        """On exit: give the sessions that are ending (their connection closed) a bounded moment to reply."""
        with self._state:
            self._state.wait_for(lambda: self._active == 0, timeout)

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def request_exit(self) -> None:
        """Stop serving (safe in a signal handler: a flag and a write to the wake pipe)."""
        self._exiting = True
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"!")

    def close(self) -> None:
        """Close every connection; each agent sees end of input and exits (hanging up what still runs). The driver's
        sessions are cancelled: the driver kills each one's tree."""
        with self._driver_lock:
            self._closed = True
            cancels = list(self._driver_sessions)
        for cancel in cancels:
            cancel.cancel()
        with self._connect_lock:
            connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            connection.close(wait_for_tunnel=True)


def _error_reply(exc: DevsyError, redact: Callable[[str], str] = str, retry: bool = False) -> dict:
    return {"op": "error", "kind": exc.kind, "exit_code": exc.exit_code, "message": redact(exc.message),
            "hint": redact(exc.hint), "retry": retry}


def _strings(value: object, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ProtocolError(f"a session {field} that is not an object of strings")
    return value


def _session_redactor(message: dict) -> Callable[[str], str]:
    """What masks a session's secrets in what this master tells its client: the client's DEVSY_REDACT, its --env
    values and what this process registered (the config's remoteEnv and containerEnv, once read)."""
    local_env, env = message.get("local_env"), message.get("env")
    extra = [*(str(local_env.get(REDACT_ENV, "")).splitlines() if isinstance(local_env, dict) else []),
             *(str(v) for v in (env.values() if isinstance(env, dict) else ()))]
    return lambda text: Redactor(configured_secrets(extra))(text)


def _listen(address: bytes) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(address)
    except OSError as exc:  # another master holds the name: the start lock should make this impossible
        listener.close()
        raise DevsyError(f"cannot listen for devsy ssh: {exc}", hint="retry; or set DEVSY_SSH_MUX=0") from exc
    listener.listen(64)
    return listener


def _report(fd: int, payload: dict) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, json.dumps(payload).encode() + b"\n")
    os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devsy.ssh.mux.master", description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="the devsy home (DEVSY_HOME)")
    parser.add_argument("--workspace", required=True, help="the workspace id")
    parser.add_argument("--user", default="", help="connect as this user first (default: the workspace's)")
    parser.add_argument("--ready-fd", type=int, required=True, help="write the start-up report here")
    args = parser.parse_args(argv)

    # fd 2 is the starting `devsy ssh`'s stderr. Keep a private copy for start-up messages and point fd 2 at our
    # log at once, so nothing we start (a provider process, say) ever holds the caller's stderr open.
    startup = os.dup(2)
    ready_fd = args.ready_fd
    log_path = master_log(args.home, args.workspace)
    try:
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    except OSError:
        log_fd = os.open(os.devnull, os.O_WRONLY)  # no workspace folder: open_workspace below says what is wrong
    os.dup2(log_fd, 2)
    os.close(log_fd)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(threadName)s %(levelname)s %(message)s")
    stderr = _Stderr(startup)
    master: Master | None = None
    # Serving, SIGTERM asks the loop to exit (request_exit); starting, it cancels the start-up from a watcher thread.
    # This handler is the one `cancelling` puts back, and one that came before `cancelling` took over is noted, so
    # no SIGTERM falls between the two.
    early: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _: master.request_exit() if master else early.append(signum))
    starting = CancelToken()
    try:
        with termination.cancelling((signal.SIGTERM,), starting.cancel, keep_ignored=False) as stopped:
            if early:
                starting.cancel()
            persist_s = persist_seconds()
            ws = open_workspace(args.home, args.workspace)
            master = Master(ws, stderr, starting)
            master.connection(args.user or ws.record.remote_user or "root")
            listener = _listen(master_address(str(args.home), ws.record.id, ws.record.uid))
    except DevsyError as exc:
        if master is not None:
            master.close()
        _report(ready_fd, {"ok": False, **_error_reply(exc)})
        return 1
    stderr.switch_to_log()
    log.info("serving workspace %s (pid %d)", ws.record.id, os.getpid())
    _report(ready_fd, {"ok": True})
    if stopped or early:  # asked to stop while starting, after the point where that cancelled anything
        master.request_exit()
    try:
        master.serve(listener, persist_s)
    finally:
        listener.close()  # new clients now start a new master; the agents see end of input and exit
        master.close()
        master.wait_for_sessions(_CLOSE_WAIT_S)  # so their clients learn why they ended
    return 0


if __name__ == "__main__":
    sys.exit(main())
