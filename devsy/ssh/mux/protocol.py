"""What `devsy ssh` and a workspace's SSH master say to each other over the master's control socket.

The design is OpenSSH's ControlMaster: one long-lived process per workspace holds the SSH connection(s) to the
agent, and each `devsy ssh` asks it for a session, handing over its own stdin/stdout/stderr descriptors
(SCM_RIGHTS), so the master reads and writes them directly: no extra copy of the bytes through this process. The
exception is a terminal as the stdin of a command: the client reads it and hands over a pipe, so job control still
stops the client when it reads in the background (mux/client.py _session_input).

Wire: length-prefixed JSON messages on a Unix stream socket. Client to master: `session` (with 3 descriptors),
`resize`, `cancel`, `exit`, `ping`. Master to client: `started` (sent just before the command goes to the agent, or
to the master's driver: from then on it may run), then `end`; or `error` (with `retry` when nothing was started);
`direct` (run this `devsy exec` with the driver instead: nothing ran, even when it comes after `started`, as an agent
older than argv sessions refused the argv); `warning` (for the client to print); `bye`, `pong`. A client retries on
a new master only when its master went away (or was killed as wedged) before `started`: a command must never run
twice. A `ping` is answered with `pong` at any time, also during a session (see mux/client.py for the liveness rule).

A `session` names a `command` (None: the login shell) or, for `devsy exec`, an `argv` and `workdir`; `user` and
`env` are the client's --user and --env as given. The master adds the rest, as a client without it would: the
defaults from the record and the workspace's remoteEnv, with devcontainer.json re-read for each session and
${localEnv:...} taken from the client's environment (`local_env`). So a client imports no devcontainer.json parsing.

The socket is in Linux's abstract namespace (no file to go stale after a crash; it vanishes with the process). Such
names carry no permissions, so both ends check the peer's uid with SO_PEERCRED: a master only serves its own user,
and a client only hands its descriptors to a master its own user runs. This module is imported by every `devsy ssh`,
so it imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct

from devsy.errors import UsageError
from devsy.exit_status import signal_number

# Part of the address: a devsy with another protocol never talks to this master (2: pings in sessions; 3: the master
# adds remoteEnv and runs `devsy exec`'s argv).
MUX_VERSION = 3
DISABLE_ENV = "DEVSY_SSH_MUX"  # "0": every `devsy ssh` makes its own connection (no master); "1" (default): a master
PERSIST_ENV = "DEVSY_SSH_PERSIST_S"  # seconds an idle master stays (default below)
DEFAULT_PERSIST_S = 600.0
MAX_PERSIST_S = 7 * 24 * 3600.0  # a week; far larger values overflow the master's poll timeout
MAX_MESSAGE = 1024 * 1024  # a session request carries the caller's environment; a larger one takes the full path
_HEADER = struct.Struct(">I")
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class ProtocolError(Exception):
    """The peer broke the protocol (or is not who it must be)."""


def mux_enabled() -> bool:
    """DEVSY_SSH_MUX: unset or "1" uses the master, "0" does not; anything else is refused (UsageError)."""
    raw = os.environ.get(DISABLE_ENV)
    if raw is None or raw == "1":
        return True
    if raw == "0":
        return False
    raise UsageError(f"{DISABLE_ENV}={raw!r} is not valid: it must be 0 (each `devsy ssh` connects by itself) or 1 "
                     "(sessions through the workspace's SSH master, the default)",
                     hint=f"set {DISABLE_ENV}=0 or {DISABLE_ENV}=1, or unset it")


def persist_seconds() -> float:
    """DEVSY_SSH_PERSIST_S: how long an idle master stays; unset means the default, a bad value is refused."""
    raw = os.environ.get(PERSIST_ENV)
    if raw is None:
        return DEFAULT_PERSIST_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= MAX_PERSIST_S:  # also refuses nan and inf
        raise UsageError(f"{PERSIST_ENV}={raw!r} is not valid: it must be a number of seconds greater than 0 and at "
                         f"most {MAX_PERSIST_S:g} (how long an idle SSH master stays)",
                         hint=f"set {PERSIST_ENV}=600 (the default), for example, or unset it")
    return seconds


def master_address(home: str, workspace_id: str, workspace_uid: str) -> bytes:
    """The master's abstract socket name: one per devsy home, workspace and creation of it (its uid)."""
    key = "\0".join((str(MUX_VERSION), os.path.realpath(home), workspace_id, workspace_uid))
    return b"\0devsy-ssh-master-" + hashlib.sha256(key.encode()).hexdigest()[:32].encode()


def agent_takes_user(user: str) -> bool:
    """Whether the agent runs as `user` exactly as an engine's exec would: a user name (both resolve it in the
    guest's passwd), or none (the default). An engine also takes a uid without a passwd entry and USER:GROUP."""
    return not user.isdigit() and ":" not in user


def peer_pid_checked(sock: socket.socket) -> int:
    """The peer's pid, after checking it runs as our uid (ProtocolError otherwise)."""
    pid, uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    if uid != os.getuid():
        raise ProtocolError(f"the peer (pid {pid}) runs as uid {uid}, not as uid {os.getuid()}")
    return pid


class MessageStream:
    """Framed JSON messages on a connected Unix stream socket; descriptors ride with a message when given."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def send(self, message: dict, fds: list[int] | None = None) -> None:
        data = json.dumps(message).encode()
        frame = _HEADER.pack(len(data)) + data
        if fds:
            sent = socket.send_fds(self.sock, [frame], fds)  # the descriptors ride with the first byte
            frame = frame[sent:]
        if frame:
            self.sock.sendall(frame)

    def receive(self, max_fds: int = 0) -> tuple[dict | None, list[int]]:
        """The next message (None at end of stream) and the descriptors that came with it, which become the
        caller's to close."""
        fds: list[int] = []
        try:
            while True:
                message = self._take()
                if message is not None:
                    return message, fds
                if max_fds:
                    # Every read may carry descriptors: a plain recv() would silently drop them.
                    data, received, _flags, _addr = socket.recv_fds(self.sock, 65536, max_fds)
                    fds.extend(received)
                else:
                    data = self.sock.recv(65536)
                if not data:
                    return None, fds
                self._buffer += data
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise

    def buffered(self) -> dict | None:
        """The next message if it has already been read in whole (several can arrive in one read), else None."""
        return self._take()

    def _take(self) -> dict | None:
        if len(self._buffer) < _HEADER.size:
            return None
        (length,) = _HEADER.unpack_from(self._buffer)
        if length > MAX_MESSAGE:
            raise ProtocolError(f"a {length}-byte message (at most {MAX_MESSAGE})")
        if len(self._buffer) < _HEADER.size + length:
            return None
        data = bytes(self._buffer[_HEADER.size:_HEADER.size + length])
        del self._buffer[:_HEADER.size + length]
        try:
            message = json.loads(data)
        except ValueError as exc:
            raise ProtocolError(f"a message that is not JSON: {exc}") from None
        if not isinstance(message, dict) or not isinstance(message.get("op"), str):
            raise ProtocolError("a message without an op")
        return message


def exit_code_for(status: int | None, signal_name: str) -> int:
    """What `devsy ssh` exits with: the status, 128+n for signal n, 255 when the guest reported neither."""
    if signal_name:
        number = signal_number(signal_name)
        return 128 + number if number is not None else 255
    return 255 if status is None else status
