"""Local port forwarding (`ssh -L`, RFC 4254 7.2 `direct-tcpip`): a channel joined to a TCP connection the agent
makes in the guest, so `-L 8080:127.0.0.1:80` reaches a server that listens only inside the guest.

Each direction is copied until its end of file, which is passed on as a half-close (a client that shuts its
sending side down still gets the whole reply); the channel closes once both directions are done.
"""

from __future__ import annotations

import logging
import socket
import threading

from .tuning import CHANNEL_READ_SIZE, PIPE_READ_SIZE

log = logging.getLogger("devsy_agent.forward")
CONNECT_TIMEOUT_S = 10.0


def connect(host: str, port: int) -> socket.socket:
    """The guest's connection to host:port (OSError when nothing accepts it there)."""
    sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    sock.settimeout(None)
    return sock


def join(channel, sock: socket.socket) -> None:
    """Copy bytes both ways between `channel` and `sock` in two threads; closes both when both ends are done."""
    done = []
    lock = threading.Lock()

    def finished() -> None:
        with lock:
            done.append(True)
            last = len(done) == 2
        if last:
            sock.close()
            channel.close()

    def to_guest() -> None:
        try:
            while True:
                data = channel.recv(CHANNEL_READ_SIZE)
                if not data:
                    break
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            log.debug("forward to the guest ended: %s", exc)
        finally:
            finished()

    def to_client() -> None:
        try:
            while True:
                data = sock.recv(PIPE_READ_SIZE)
                if not data:
                    break
                channel.sendall(data)
            channel.shutdown_write()
        except (OSError, EOFError) as exc:
            log.debug("forward to the client ended: %s", exc)
        finally:
            finished()

    for target in (to_guest, to_client):
        threading.Thread(target=target, name="forward-%d" % channel.get_id(), daemon=True).start()
