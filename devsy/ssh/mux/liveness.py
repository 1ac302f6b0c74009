"""Is the SSH master still working? The client's liveness rule, and the pid-reuse-safe kill of a wedged master.

A master that sends nothing for PING_AFTER_S is pinged; a ping unanswered for NOTICE_AFTER_S is reported to the
user (what we wait for), and one unanswered for ANSWER_WITHIN_S means the master is wedged (stopped, deadlocked):
the client kills it. A warm session ends long before PING_AFTER_S, so the rule costs it nothing. Imported by every
`devsy ssh`: standard library only.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import time
from typing import TYPE_CHECKING

from devsy import errors

if TYPE_CHECKING:  # imported where a master is killed: that is rare, and every `devsy ssh` imports this module
    from devsy import process_tree

PING_AFTER_S = 3.0  # silence from the master this long: ping it
NOTICE_AFTER_S = 3.0  # a ping unanswered this long: tell the user what we wait for
ANSWER_WITHIN_S = 15.0  # a ping unanswered this long: the master is wedged (generous: a loaded host answers in ms)
STARTED_WITHIN_S = 300.0  # even a master that answers must start the command by then (it may deliver the agent)
KILL_WAIT_S = 10.0


class MasterUnresponsive(errors.DevsyError):
    """The SSH master stopped answering during a session; it was killed, so the session ended with it."""

    kind = "ssh-master-unresponsive"
    exit_code = 255  # like OpenSSH when its connection is lost: the command's own status is unknown


class Wedged(Exception):
    """The master is alive but does not answer (or does not start the command) within the bounds."""


class Liveness:
    """Tracks when the master was last heard from; `check` pings it, tells the user, or raises Wedged."""

    def __init__(self, describe: str) -> None:
        self.describe = describe  # "the SSH master of workspace W (pid N)"
        self.heard = time.monotonic()
        self.pinged_at: float | None = None
        self.noticed = False

    def heard_from(self) -> None:
        self.heard, self.pinged_at = time.monotonic(), None

    def timeout(self) -> float:
        """Seconds until `check` has something to do."""
        if self.pinged_at is None:
            due = self.heard + PING_AFTER_S
        else:
            due = self.pinged_at + (ANSWER_WITHIN_S if self.noticed else NOTICE_AFTER_S)
        return max(0.0, due - time.monotonic())

    def check(self, send_ping, doing: str) -> None:
        """Called when `timeout` has passed: ping, say what we wait for (`doing`: what the master should do), or
        raise Wedged."""
        now = time.monotonic()
        if self.pinged_at is None:
            if now - self.heard >= PING_AFTER_S:
                self.pinged_at = now
                with contextlib.suppress(OSError):  # a master that is gone: the socket's end tells us
                    send_ping()
            return
        silent = now - self.pinged_at
        if silent >= ANSWER_WITHIN_S:
            raise Wedged(f"{self.describe} did not answer for {silent:.0f}s")
        if silent >= NOTICE_AFTER_S and not self.noticed:
            self.noticed = True
            say(f"{self.describe} has not answered for {now - self.heard:.0f}s; waiting for it to {doing} "
                f"(it is treated as wedged after {ANSWER_WITHIN_S:g}s without an answer)")


def say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"devsy ssh: {text}\n".encode())


def kill_master(sock: socket.socket, pid: int) -> bool:
    """SIGKILL the master at the other end of `sock` and wait (bounded) until it is gone; False if it outlived the
    wait."""
    master = pin_master(sock, pid)
    if master is None:
        return True
    with master:
        return kill_and_wait(master)


def pin_master(sock: socket.socket, pid: int) -> process_tree.Pinned | None:
    """The master at the other end of `sock` (pid from SO_PEERCRED), pinned, or None when it has exited.
    Pid-reuse-safe: our connection to the master still being open after the pidfd was taken proves that the pid
    was still the master's then."""
    from devsy import process_tree

    return process_tree.pin(pid, lambda: master_connected(sock))


def kill_and_wait(master: process_tree.Pinned) -> bool:
    """SIGKILL the master (a stopped one too) and wait, bounded, until it has exited."""
    from devsy import process_tree

    return process_tree.stop([master], group=False, grace=0, kill_wait=KILL_WAIT_S)[0].ended


def master_connected(sock: socket.socket) -> bool:
    """Whether the master still holds its end of `sock` (a peer that exited hangs the socket up)."""
    poller = select.poll()
    poller.register(sock, select.POLLHUP)  # POLLHUP is always reported; this asks for nothing else
    return not any(event & (select.POLLHUP | select.POLLERR) for _, event in poller.poll(0))
