"""A fix for a paramiko stall: its transport thread waiting on a key re-exchange that only it can finish.

paramiko holds every outgoing message while keys are being re-exchanged (every 512 MiB, or 2^29 packets). Its own
transport thread also sends some messages, above all the reply to a channel close; if a close arrives during a
re-exchange, that thread blocks waiting for the exchange, which it alone can complete, and gives up after 30 s
("Key-exchange timed out"). Long-lived connections, such as devsy ssh's master, cross that volume routinely.

Here such a message is queued instead, and sent by that thread as soon as the new keys are in use. Used by both
ends: the agent's server transport and devsy's client transport.
"""

from __future__ import annotations

import threading


class KexSafeSends:
    """Mix in before paramiko.Transport."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        self._deferred_sends: list = []

    def _send_user_message(self, data) -> None:
        if threading.current_thread() is self and not self.clear_to_send.is_set():  # type: ignore[attr-defined]
            self._deferred_sends.append(data)  # only this thread appends and flushes: no lock needed
            return
        super()._send_user_message(data)  # type: ignore[misc]

    def _parse_newkeys(self, m) -> None:
        super()._parse_newkeys(m)  # type: ignore[misc]  # new keys in use; clear_to_send is set again
        pending, self._deferred_sends = self._deferred_sends, []
        for data in pending:
            super()._send_user_message(data)  # type: ignore[misc]
