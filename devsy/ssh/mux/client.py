"""`devsy ssh` and `devsy exec` sessions through the workspace's SSH master (see mux/protocol.py).

This is the path every `devsy ssh` and `devsy exec` takes (unless DEVSY_SSH_MUX=0, or --stdio), so it stays small: it
reads the workspace record, connects to the master (starting one when there is none), hands over its
stdin/stdout/stderr and waits for the exit status. The master does the SSH work. Anything unusual (no record, an
unreadable one; for exec, a workspace without an agent in the guest) is left to the full path (ssh/command.py, the
driver's exec), which owns those errors: the caller falls back when `run` returns None.

Cancellation: SIGINT/SIGTERM/SIGHUP (those not inherited as ignored: `nohup`) become a `cancel` message; the master
has the agent kill the command's process tree and answers once that is done (bounded here by CANCEL_WAIT_S). If
this process dies instead, the master sees its control socket close and does the same.

Every wait on the master is bounded. Connecting and sending the request: CONNECT_TIMEOUT_S. Then the liveness rule
(mux/liveness.py): whenever the master has been silent for a few seconds, it is pinged, and it must answer within
ANSWER_WITHIN_S, at any time: while it connects to the agent and during the whole session (its watcher thread
answers, whatever the command does; a command may rightly stay silent for hours). An unanswered ping (or no `started`
within STARTED_WITHIN_S) means the master is wedged, and it is killed (pid-reuse-safe), because it holds this
process's stdout/stderr and would keep its caller's pipe open forever:
- before `started`, the command cannot have run, so a new master is started and runs it (at most one replacement);
- after `started`, the command may be running: it is never run again. `devsy ssh` reports MasterUnresponsive (exit
  255, like OpenSSH losing its connection); killing the master ends its connection to the agent, which hangs up the
  command.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from devsy import errors, termination
from devsy.ssh import terminal
from devsy.ssh.mux.liveness import (STARTED_WITHIN_S, Liveness, MasterUnresponsive, Wedged, kill_and_wait,
                                    kill_master, pin_master, say)
from devsy.ssh.mux.protocol import (MAX_MESSAGE, MessageStream, ProtocolError, exit_code_for, master_address,
                                   peer_pid_checked)
from devsy.workspace.ids import validate_workspace_id
from devsy.workspace.paths import workspace_paths

CANCEL_WAIT_S = 15.0  # the agent kills the tree, then reports; the cancellation bound is 10 s
STOP_WAIT_S = 10.0
_DRAIN_TIMEOUT_S = 2.0  # reading what a killed master left unread on its socket
CONNECT_TIMEOUT_S = 5.0  # connecting and sending the request: a master that accepts nothing within this is wedged


class MasterGone(Exception):
    """The master went away before the command started: a new master may run it."""


def record_of(home: Path, workspace_id: str) -> dict | None:
    """The fields of workspace.json this path needs, or None when it should leave the case to the full path."""
    try:
        with open(workspace_paths(home, validate_workspace_id(workspace_id)).record, "rb") as handle:
            data = json.load(handle)
    except (OSError, ValueError, errors.DevsyError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("uid"), str) or not data["uid"]:
        return None
    return data


def connect(home: Path, record: dict) -> tuple[socket.socket, int] | None:
    """A connection to the workspace's master and its pid, or None when no master is listening. The socket keeps a
    CONNECT_TIMEOUT_S timeout for the request the caller sends."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)  # a master that stopped accepting leaves connect() waiting in its backlog
    try:
        sock.connect(master_address(str(home), record["id"], record["uid"]))
        return sock, peer_pid_checked(sock)
    except (ConnectionRefusedError, FileNotFoundError):
        sock.close()
        return None
    except TimeoutError:
        sock.close()
        raise errors.DevsyError(f"the SSH master of workspace {record['id']} accepted no connection within "
                                f"{CONNECT_TIMEOUT_S:g}s (it does not serve its queue of waiting clients)",
                                hint="retry in a few seconds: the clients it holds kill a master that stops "
                                     "answering; or set DEVSY_SSH_MUX=0 to connect without a master") from None
    except ProtocolError as exc:
        sock.close()
        raise errors.DevsyError(f"refusing the SSH master socket of workspace {record['id']}: {exc}",
                                hint="another user's process holds this workspace's master address; stop it, or "
                                     "set DEVSY_SSH_MUX=0 to connect without a master") from None
    except OSError:
        sock.close()
        raise


# What the session message adds to Session.message when it is sent (pty size, stdin flag): well under this.
_MESSAGE_HEADROOM = 4096


@dataclass(frozen=True)
class Session:
    """What a session asks for, as the user gave it: the master adds the defaults and remoteEnv (mux/protocol.py).
    `argv` (with `workdir`) is `devsy exec`'s command; otherwise `command` (None: the login shell)."""

    command: str | None = None
    argv: list[str] | None = None
    workdir: str = ""
    user: str = ""
    env: dict[str, str] = field(default_factory=dict)
    tty: bool = False

    @functools.cached_property  # read twice (its size, then sent): built once
    def message(self) -> dict:
        return {"op": "session", "command": self.command, "argv": self.argv, "workdir": self.workdir,
                "user": self.user, "env": self.env, "local_env": dict(os.environ)}


def run(home: Path, workspace_id: str, session: Session) -> int | None:
    """Run the session through the master; the exit code, or None to use the full path instead."""
    record = record_of(home, workspace_id)
    if record is None or not _usable(1) or not _usable(2):
        return None  # the full path has the errors for these
    if len(json.dumps(session.message)) > MAX_MESSAGE - _MESSAGE_HEADROOM:
        return None  # a huge environment or argv: more than the master reads in one message; the full path takes it
    stdin_fd = _stdin_fd()
    interactive = session.argv is None and terminal.session_terminal(stdin_fd, session.command, session.tty,
                                                                     workspace_paths(home, workspace_id))
    with _signals() as signals, _session_input(stdin_fd, interactive) as (session_stdin, on_started):
        for attempt in (1, 2):
            try:
                sock, pid = _master(home, record, signals)
                with contextlib.closing(sock):
                    master = _Master(sock, pid, f"the SSH master of workspace {workspace_id} (pid {pid})")
                    return _session(master, signals, workspace_id, session, stdin_fd=session_stdin,
                                    interactive=interactive, on_started=on_started)
            except errors.Cancelled:
                if signals.received:  # cancelled while a master was starting: it was stopped
                    return 128 + signals.received[0]
                raise
            except MasterGone as gone:
                if attempt == 2:
                    raise errors.DevsyError(
                        f"the SSH master of workspace {workspace_id} went away twice before the command started"
                        f"{': ' + str(gone) if str(gone) else ''}",
                        hint="check that the workspace is running (`devsy status`), or retry with DEVSY_SSH_MUX=0")
    return None  # not reached


class _Master:
    """The master this session talks to: its socket, its pid and how messages name it."""

    def __init__(self, sock: socket.socket, pid: int, describe: str) -> None:
        self.sock, self.pid, self.describe = sock, pid, describe

    def kill(self, why: str) -> None:
        """Kill it (it is wedged); raises when even that does not end it, since a new master could not start."""
        if not kill_master(self.sock, self.pid):
            raise errors.DevsyError(f"{self.describe} {why}, and it did not exit when killed",
                                    hint=f"kill process {self.pid} yourself, or set DEVSY_SSH_MUX=0")


def _master(home: Path, record: dict, signals: _Signals) -> tuple[socket.socket, int]:
    found = connect(home, record)
    if found is not None:
        return found
    # Imported only here: starting a master is the rare, slow path.
    from devsy.ssh.mux.spawn import start_master

    return start_master(home, record, signals, connect)


def _session(master: _Master, signals: _Signals, workspace_id: str, session: Session, *, stdin_fd: int | None,
             interactive: bool, on_started: Callable[[], None]) -> int | None:
    stream = MessageStream(master.sock)
    with contextlib.ExitStack() as stack:
        pty = None
        if interactive:
            assert stdin_fd is not None
            stack.enter_context(terminal.raw_mode(stdin_fd, signals.wait))  # first: what is typed from now on is kept
            columns, rows = terminal.size(stdin_fd)
            pty = {"term": os.environ.get("TERM", "xterm-256color"), "cols": columns, "rows": rows}
            stack.enter_context(terminal.on_resize(stdin_fd, signals.resized))
            signals.size = terminal.size(stdin_fd)  # resized before the handler was in place: sent below if so
        null = None
        if stdin_fd is None:
            null = os.open(os.devnull, os.O_RDONLY)
            stack.callback(os.close, null)
        try:
            stream.send({**session.message, "pty": pty, "stdin": stdin_fd is not None},
                        fds=[stdin_fd if stdin_fd is not None else null, 1, 2])  # type: ignore[list-item]
        except TimeoutError:  # it does not read its clients: it must not read this request later, either
            master.kill(f"did not take the session request within {CONNECT_TIMEOUT_S:g}s")
            say(f"{master.describe} did not take the request; killed it, starting a new one")
            raise MasterGone("it did not take the request") from None
        except OSError as exc:  # it is closing (idle, or asked to exit): nothing was started
            raise MasterGone(f"it hung up: {exc}") from None
        master.sock.settimeout(None)  # from here on, every wait is the poll below, bounded by the liveness rule
        try:
            reply, started = _await_end(stream, signals, (pty["cols"], pty["rows"]) if pty else None,
                                        Liveness(master.describe), on_started)
        except _WedgedAt as wedged:
            master.kill(str(wedged.cause))
            if signals.received:  # it was being asked to cancel: its death ended the session
                return 128 + signals.received[0]
            # A slow master may have sent `started` (and the command on) between our last poll and its death: what it
            # wrote before dying decides, or the command could run twice. Only a command that never ran is retried.
            if not wedged.started and not _started_before_death(stream):
                say(f"{wedged.cause}; killed it, starting a new one")
                raise MasterGone(str(wedged.cause)) from None
            raise MasterUnresponsive(
                f"{wedged.cause} during the session, so it was killed (it held this command's output open); the "
                "session ended with it and the command's outcome is unknown",
                hint="run the command again (a new master starts); if this repeats, read "
                     f"{workspace_id}'s ssh-master.log in the devsy home, or set DEVSY_SSH_MUX=0") from None
    return _outcome(reply, started, workspace_id, signals)


def _started_before_death(stream: MessageStream) -> bool:
    """Whether a master that is now dead told `started` in what it left unread on the socket (read to EOF, bounded:
    the dead master holds no end of it any more)."""
    stream.sock.settimeout(_DRAIN_TIMEOUT_S)
    try:
        while True:
            message = stream.buffered()
            if message is None:
                message, _ = stream.receive()
            if message is None:
                return False
            if message["op"] == "started":
                return True
    except OSError:  # nothing within the bound, or reset: what it sent before dying was read above
        return False
    except ProtocolError:  # a garbled frame may have been `started`: the outcome is unknown, so never rerun
        return True


class _WedgedAt(Exception):
    def __init__(self, cause: Wedged, started: bool) -> None:
        super().__init__(str(cause))
        self.cause, self.started = cause, started


def _await_end(stream: MessageStream, signals: _Signals, size_sent: tuple[int, int] | None,
               liveness: Liveness | None = None, on_started: Callable[[], None] = lambda: None,
               ) -> tuple[dict | None, bool]:
    """The master's last message (None if it went away) and whether the command had started (then on_started was
    called). Terminal resizes are passed on; on a signal, the master is asked to cancel and its answer awaited
    (bounded). Raises _WedgedAt when the master stops answering (see the module docstring)."""
    liveness = liveness or Liveness("the SSH master")
    deadline, started = None, False
    start_by = time.monotonic() + STARTED_WITHIN_S
    poller = select.poll()  # not select(): descriptors past 1023 are possible in a process that embeds this
    poller.register(stream.sock, select.POLLIN)
    poller.register(signals.wake_r, select.POLLIN)
    while True:
        message = stream.buffered()  # `started` and `end` may have arrived in one read
        if message is None:
            now = time.monotonic()
            timeout = liveness.timeout()
            if deadline is not None:
                timeout = min(timeout, max(0.0, deadline - now))
            if not started:
                timeout = min(timeout, max(0.0, start_by - now))
            ready = {fd for fd, _ in poller.poll(timeout * 1000)}
            if not ready:
                if deadline is not None and time.monotonic() >= deadline:
                    return None, started  # no confirmation in time; our exit closes the socket, which it acts on
                try:
                    if not started and time.monotonic() >= start_by:
                        raise Wedged(f"{liveness.describe} did not start the command within {STARTED_WITHIN_S:g}s")
                    liveness.check(lambda: stream.send({"op": "ping"}),
                                   "finish the session" if started else "start the command")
                except Wedged as wedged:
                    raise _WedgedAt(wedged, started) from None
                continue
            if signals.wake_r in ready:
                os.read(signals.wake_r, 64)
                if signals.received and deadline is None:
                    with contextlib.suppress(OSError):
                        stream.send({"op": "cancel"})
                    deadline = time.monotonic() + CANCEL_WAIT_S
                if size_sent is not None and signals.size not in (None, size_sent) and deadline is None:
                    size_sent = signals.size
                    with contextlib.suppress(OSError):
                        stream.send({"op": "resize", "cols": size_sent[0], "rows": size_sent[1]})
            if stream.sock.fileno() not in ready:
                continue
            try:
                message, _ = stream.receive()
            except ConnectionResetError:
                message = None
            if message is None:
                return None, started
        liveness.heard_from()
        if message["op"] == "started":
            started = True
            on_started()
        elif message["op"] == "warning":
            _warn(str(message.get("message", "")))
        elif message["op"] in ("end", "error", "direct"):
            return message, started


def _outcome(reply: dict | None, started: bool, workspace_id: str, signals: _Signals) -> int | None:
    if signals.received:
        return 128 + signals.received[0]
    if reply is not None and reply["op"] == "direct":
        return None  # the caller runs it with the driver
    if reply is None:
        if not started:
            raise MasterGone("it closed the connection")
        raise errors.DevsyError(f"the SSH master of workspace {workspace_id} went away during the session; the "
                                "command's outcome is unknown",
                                hint=f"read {workspace_id}'s ssh-master.log in the devsy home, and check the "
                                     "workspace (`devsy status`)")
    if reply["op"] == "error":
        if reply.get("retry"):
            raise MasterGone(str(reply.get("message", "")))
        raise errors.ReportedError(str(reply.get("kind", "")), reply.get("exit_code", 1), str(reply.get("message", "")),
                                   str(reply.get("hint", "")))
    if reply.get("broken_pipe"):
        return exit_code_for(None, "PIPE")
    return exit_code_for(reply.get("exit_code"), str(reply.get("signal") or ""))


def _warn(text: str) -> None:
    """A warning the master found for this session (it masked its secrets), printed as this process's own."""
    from devsy.progress import Progress  # only when there is one: it imports the redaction filter

    Progress().warn(text)


def stop_master(home: Path, workspace_id: str, workspace_uid: str) -> bool:
    """Ask the workspace's master (if any) to exit, and wait (bounded) until its process is gone; SIGKILL when it
    does not exit in time (it holds nothing that needs a clean close). Used by stop and delete, so nothing of the
    workspace outlives them. True when a master was running."""
    found = connect(home, {"id": workspace_id, "uid": workspace_uid})
    if found is None:
        return False
    sock, pid = found
    with contextlib.closing(sock):
        master = pin_master(sock, pid)
        if master is None:
            return True  # already gone
        with master:
            with contextlib.suppress(OSError):
                MessageStream(sock).send({"op": "exit"})
            if not master.wait(STOP_WAIT_S):
                kill_and_wait(master)
    return True


@contextlib.contextmanager
def _session_input(stdin_fd: int | None, interactive: bool) -> Iterator[tuple[int | None, Callable[[], None]]]:
    """The stdin the master is given, and what to do once it says the command started.

    A terminal is read here and passed on through a pipe (stdin_pump.through_pipe), so job control stops this job
    when it reads in the background (or after Ctrl-Z and `bg`), as on the driver's path, instead of the master taking
    what the user types at their shell. The copy starts with the command: until then a stopped client holds no
    master's start lock, and what is typed ahead stays in the terminal for the path that runs the command if this
    one does not (`direct`, an error). An interactive session gets the terminal itself: its raw mode already stops a
    background job, and it needs the terminal for its size."""
    if stdin_fd is None or interactive or not os.isatty(stdin_fd):
        yield stdin_fd, lambda: None
        return
    from devsy.stdin_pump import through_pipe  # here: a session from a script or a pipe does without it

    with through_pipe(stdin_fd) as piped:
        yield piped.read_end, piped.start


def _stdin_fd() -> int | None:
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else 0
    except (OSError, ValueError):
        return None
    return fd if _usable(fd) else None  # started with stdin closed: the session gets none


def _usable(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


class _Signals(termination.SignalWake):
    """SIGINT/SIGTERM/SIGHUP (and SIGWINCH's new size) recorded and signalled on a pipe, so a poll loop notices
    them at once."""

    def __init__(self) -> None:
        super().__init__()
        self.size: tuple[int, int] | None = None  # the terminal's latest size (interactive sessions)

    def resized(self, columns: int, rows: int) -> None:
        # Runs in a signal handler: record and wake the loop, which sends it (a send from here could interleave
        # with one the loop is making).
        self.size = (columns, rows)
        self.wake()


@contextlib.contextmanager
def _signals() -> Iterator[_Signals]:
    signals = _Signals()
    try:
        with termination.handling((signal.SIGINT, signal.SIGTERM, signal.SIGHUP), signals.handler), \
                signals.from_any_thread():
            yield signals
    finally:
        signals.close()
