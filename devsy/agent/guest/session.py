"""One SSH session channel: its process, the byte pumps between them, and the exit status or signal at the end.

Output is forwarded as raw bytes; stdout and stderr stay separate (with a pty they are one terminal stream). The
session ends like sshd's: with pipes, when the process has exited and its output reached end of file; with a pty,
when the process has exited and the terminal has been drained.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import signal
import threading
from typing import Callable, Optional

from .accounts import AccountError, session_account
from .channel_requests import send_exit_signal
from .process import SessionSpec, Spawned, StartError, kill_tree, resize, spawn
from .tuning import CHANNEL_READ_SIZE, PIPE_READ_SIZE

log = logging.getLogger("devsy_agent.session")
_INPUT_JOIN_S = 5.0


class Session:
    def __init__(self, channel, username: str, spec: SessionSpec) -> None:
        self.channel = channel
        self.username = username
        self.spec = spec
        self._spawned: Optional[Spawned] = None
        self._kill_requested = False  # a KILL that arrived before the process was started
        self._input: Optional[threading.Thread] = None
        self._exited_r, self._exited_w = os.pipe()  # becomes readable when the process has exited

    def start(self) -> None:
        threading.Thread(target=self._run, name="session-%d" % self.channel.get_id(), daemon=True).start()

    def resize(self, cols: int, rows: int, width_px: int, height_px: int) -> bool:
        spawned = self._spawned
        if spawned is None or spawned.master_fd is None:
            return False
        try:
            resize(spawned.master_fd, cols, rows, width_px, height_px)
        except OSError:
            return False
        return True

    def hangup(self) -> None:
        """The client is gone: hang up the session's process group, as sshd does when a connection drops."""
        spawned = self._spawned
        if spawned is not None and spawned.proc.poll() is None:
            for sig in (signal.SIGHUP, signal.SIGCONT):
                try:
                    os.killpg(spawned.proc.pid, sig)
                except OSError:
                    pass

    def deliver_signal(self, name: str) -> bool:
        """RFC 4254 `signal`. KILL stops the whole process tree (what a cancelled `devsy ssh` asks for: its
        command's children too, not only the shell); other signals go to the session's process group."""
        number = getattr(signal, "SIG" + name, None) if name.isalnum() else None
        if number is None:
            return False
        if number == signal.SIGKILL:
            self._kill_requested = True  # read by _run right after the spawn, in case we are first
        spawned = self._spawned
        if spawned is None:
            return False
        if number == signal.SIGKILL:
            kill_tree(spawned.proc.pid)  # even when the shell itself has exited: what it left running goes too
            return True
        if spawned.proc.poll() is not None:
            return False
        try:
            os.killpg(spawned.proc.pid, number)
        except OSError:
            return False
        return True

    def _run(self) -> None:
        try:
            self._spawned = spawned = spawn(session_account(self.username), self.spec)
        except StartError as exc:
            self._fail(str(exc), exc.exit_code)
            return
        except (AccountError, OSError) as exc:
            # An argv session (`devsy exec`) reports what cannot start as a shell would; a login session as sshd.
            self._fail(str(exc), 126 if self.spec.argv is not None else 1)
            return
        if self._kill_requested:
            kill_tree(spawned.proc.pid)
        self._input = threading.Thread(target=self._pump_in, args=(spawned,), daemon=True)
        self._input.start()
        reaper = threading.Thread(target=self._reap, args=(spawned,), daemon=True)
        reaper.start()
        if spawned.stderr_fd is None:
            self._pump_terminal(spawned.stdout_fd)
        else:
            errors = threading.Thread(target=self._pump_out, daemon=True,
                                      args=(spawned.stderr_fd, self.channel.sendall_stderr, spawned.proc.stderr))
            errors.start()
            self._pump_out(spawned.stdout_fd, self.channel.sendall, spawned.proc.stdout)
            errors.join()
        reaper.join()  # it has written to the exit pipe, which _finish closes
        self._finish(spawned.proc.returncode)

    def _reap(self, spawned: Spawned) -> None:
        spawned.proc.wait()
        os.write(self._exited_w, b"x")

    def _pump_out(self, fd: int, send: Callable[[bytes], None], pipe) -> None:
        try:
            while True:
                data = os.read(fd, PIPE_READ_SIZE)
                if not data:
                    return
                send(data)
        except (OSError, EOFError) as exc:
            log.debug("output pump ended: %s", exc)  # the channel closed under us: the client has gone
        finally:
            pipe.close()  # through Popen's file object, which owns the descriptor (a second close could hit a reuse)

    def _pump_terminal(self, master: int) -> None:
        # Background jobs may keep the terminal open after the shell exits; sshd ends the session anyway, so we read
        # until the process has exited and then drain what is left without blocking.
        try:
            while True:
                ready, _, _ = select.select([master, self._exited_r], [], [])
                if self._exited_r in ready:
                    self._drain_terminal(master)
                    return
                data = self._read_terminal(master)
                if not data:
                    return
                self.channel.sendall(data)
        except (OSError, EOFError) as exc:
            log.debug("terminal pump ended: %s", exc)

    def _drain_terminal(self, master: int) -> None:
        os.set_blocking(master, False)
        while True:
            data = self._read_terminal(master)
            if not data:
                return
            self.channel.sendall(data)

    @staticmethod
    def _read_terminal(master: int) -> bytes:
        try:
            return os.read(master, PIPE_READ_SIZE)
        except BlockingIOError:
            return b""
        except OSError as exc:
            if exc.errno == errno.EIO:  # every slave end is closed: the terminal's end of file
                return b""
            raise

    def _pump_in(self, spawned: Spawned) -> None:
        fd = spawned.stdin_fd
        try:
            while True:
                data = self.channel.recv(CHANNEL_READ_SIZE)
                if not data:
                    break
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
        except OSError as exc:
            log.debug("input pump ended: %s", exc)  # the process closed its stdin; that is its right
        if spawned.master_fd is None:
            try:
                spawned.proc.stdin.close()  # end of input for the process
            except OSError:
                pass

    def _finish(self, returncode: int) -> None:
        try:
            name = _signal_name(-returncode) if returncode < 0 else ""
            if name:
                send_exit_signal(self.channel, name)
            else:  # an exit status, or a signal SSH has no name for (reported as a shell would: 128+n)
                self.channel.send_exit_status(returncode if returncode >= 0 else 128 - returncode)
            self.channel.shutdown_write()
            self.channel.close()
        except (OSError, EOFError, ValueError) as exc:
            log.debug("could not report the exit status: %s", exc)
        finally:
            if self._spawned is not None and self._spawned.master_fd is not None:
                if self._input is not None:
                    self._input.join(_INPUT_JOIN_S)  # the closed channel ends it; then the terminal can go
                os.close(self._spawned.master_fd)
            os.close(self._exited_r)
            os.close(self._exited_w)

    def _fail(self, message: str, exit_code: int) -> None:
        try:
            self.channel.sendall_stderr(("devsy-agent: %s\n" % message).encode("utf-8", "replace"))
            self.channel.send_exit_status(exit_code)
            self.channel.close()
        except (OSError, EOFError) as exc:
            log.debug("could not report a session failure: %s", exc)
        finally:
            os.close(self._exited_r)
            os.close(self._exited_w)


def _signal_name(number: int) -> str:
    """The RFC 4254 name of a signal ("TERM" for SIGTERM), or "" if it has none."""
    try:
        return signal.Signals(number).name[3:]
    except ValueError:
        return ""
