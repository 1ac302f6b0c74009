"""The two RFC 4254 channel requests paramiko has no method for: `exit-signal` (6.10) and `signal` (6.9).

Both ends use them: the agent reports a command killed by a signal with `exit-signal`, and devsy's SSH master asks
the agent to stop a cancelled session with `signal`. They are sent the way paramiko sends `exit-status`.
"""

from __future__ import annotations


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


def send_signal(channel, name: str) -> None:
    """Ask the server to deliver signal `name` to the session's process (the agent: "KILL" stops its whole tree)."""
    _send(channel, "signal", name)
