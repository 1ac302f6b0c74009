"""The channel requests paramiko has no method for: RFC 4254's `exit-signal` (6.10) and `signal` (6.9), and devsy's
own `argv@devsy`.

Both ends use the first two: the agent reports a command killed by a signal with `exit-signal`, and devsy's SSH master asks
the agent to stop a cancelled session with `signal`. They are sent the way paramiko sends `exit-status`.

`argv@devsy` is `devsy exec` through the SSH master: like `exec`, but it runs an argv exactly (no shell, so no quoting
and no shell start-up files) in exactly the directory it names, as a driver's exec does. Its payload is JSON
{"argv": [...], "workdir": "..."}; ASCII-only JSON keeps non-UTF-8 bytes (surrogate escapes) exact.
"""

from __future__ import annotations

import json

ARGV_REQUEST = "argv@devsy"


def _send(channel, request: str, *fields) -> None:
    from paramiko.common import cMSG_CHANNEL_REQUEST
    from paramiko.message import Message

    m = Message()
    m.add_byte(cMSG_CHANNEL_REQUEST)
    m.add_int(channel.remote_chanid)
    m.add_string(request)
    m.add_boolean(False)  # want_reply: neither request has one (RFC 4254)
    for value in fields:
        if isinstance(value, bool):
            m.add_boolean(value)
        else:
            m.add_string(value)
    channel.transport._send_user_message(m)


def send_exit_signal(channel, name: str) -> None:
    """Report that the session's process died of signal `name` ("TERM", "KILL", ...)."""
    _send(channel, "exit-signal", name, False, "", "")  # core dumped (not known from a returncode), message, lang


def request_argv(channel, argv, workdir: str) -> None:
    """Ask the agent to run `argv` in `workdir` on this session channel, and wait for its answer, as paramiko's
    exec_command does: ArgvRefused when it refuses (an agent older than this request, or a host-side server).
    A refusal is known from the failure message itself (devsy's client transport marks the channel, ssh/client.py):
    a connection that dies closes the channel too, and a command that may have started must never run twice."""
    from paramiko.common import cMSG_CHANNEL_REQUEST
    from paramiko.message import Message
    from paramiko.ssh_exception import SSHException

    if channel.closed:
        raise SSHException("Channel is not open")  # as exec_command says it: a wait for an answer would never end
    m = Message()
    m.add_byte(cMSG_CHANNEL_REQUEST)
    m.add_int(channel.remote_chanid)
    m.add_string(ARGV_REQUEST)
    m.add_boolean(True)
    m.add_string(json.dumps({"argv": list(argv), "workdir": workdir}))
    channel._event_pending()
    channel.transport._send_user_message(m)
    try:
        channel._wait_for_event()
    except Exception:
        if getattr(channel, "request_refused", False):
            raise ArgvRefused("the agent refused the argv@devsy request") from None
        raise


class ArgvRefused(Exception):
    """The server answered argv@devsy with a failure: nothing was started on the channel."""


def parse_argv_request(payload: bytes):
    """The (argv, workdir) of an `argv@devsy` payload; ValueError when it is not one."""
    data = json.loads(payload.decode("ascii"))  # UnicodeDecodeError and JSONDecodeError are ValueErrors
    if not isinstance(data, dict):
        raise ValueError("an argv@devsy payload must be a JSON object")
    argv, workdir = data.get("argv"), data.get("workdir", "")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv) \
            or not isinstance(workdir, str):
        raise ValueError("an argv@devsy request needs a non-empty argv of strings and a workdir string")
    return argv, workdir


def reply(channel, ok: bool) -> None:
    """Answer a channel request that wanted a reply, as paramiko does for the requests it knows."""
    from paramiko.common import cMSG_CHANNEL_FAILURE, cMSG_CHANNEL_SUCCESS
    from paramiko.message import Message

    m = Message()
    m.add_byte(cMSG_CHANNEL_SUCCESS if ok else cMSG_CHANNEL_FAILURE)
    m.add_int(channel.remote_chanid)
    channel.transport._send_user_message(m)


def send_signal(channel, name: str) -> None:
    """Ask the server to deliver signal `name` to the session's process (the agent: "KILL" stops its whole tree)."""
    _send(channel, "signal", name)
