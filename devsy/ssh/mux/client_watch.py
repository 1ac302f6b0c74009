"""How the SSH master follows one session's client (mux/master.py): its pings, resizes and cancellation.

A watcher thread per session reads the client's control socket for as long as the session lasts. A ping is
answered at once (the client's proof that the master still works, even while it connects to the agent); a resize
goes to the command's channel; a cancel, or the client going away, cancels the session.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from devsy.agent.guest.channel_requests import send_signal
from devsy.driver.base import CancelToken
from devsy.ssh.mux.protocol import MessageStream

log = logging.getLogger("devsy.ssh.master")
CONFIRM_KILL_S = 8.0  # the agent freezes and kills the tree, then reports the signal; within the 10 s bound


class ClientWatch:
    """One session's client, as its watcher thread follows it: sends from that thread and the session's are
    serialized; `channel` is set once the command's channel is open (for resizes)."""

    def __init__(self, stream: MessageStream) -> None:
        self.stream = stream
        self.cancel = CancelToken()
        self.channel: Any = None
        self._send_lock = threading.Lock()

    def send(self, message: dict) -> None:
        with self._send_lock:
            self.stream.send(message)

    def start(self) -> None:
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        try:
            while True:
                message, _ = self.stream.receive()
                if message is None:
                    return
                if message["op"] == "cancel":
                    self.cancel.cancel()  # and go on answering pings while the agent kills the tree
                elif message["op"] == "ping":
                    self.send({"op": "pong"})
                elif message["op"] == "resize" and self.channel is not None:
                    self.channel.resize_pty(width=int(message["cols"]), height=int(message["rows"]))
        except Exception as exc:  # noqa: BLE001 - whatever ends the watch (a closed socket, a closed channel) ...
            log.debug("client watch ended: %s", exc)
        finally:
            self.cancel.cancel()  # ... cancels the session; after it ended this changes nothing


def kill_session(channel: Any) -> None:
    """A cancelled session: the agent kills the command's process tree, reports the signal and closes the channel."""
    with contextlib.suppress(OSError, EOFError):
        send_signal(channel, "KILL")
    if not channel.status_event.wait(CONFIRM_KILL_S):
        log.warning("the agent did not confirm the kill of channel %d within %gs", channel.get_id(), CONFIRM_KILL_S)
    channel.close()
