"""A user's terminal, for tests of what devsy does on one: a pty we hold the other end of (Terminal), and a shell's
job control on it (job_shell)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
from collections.abc import Iterator


class Terminal:
    """`devsy ssh` running on a pty we control, like a user's terminal."""

    def __init__(self, argv: list[str], env: dict[str, str], rows: int, cols: int) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: becomes devsy ssh on the pty
            os.execve(argv[0], argv, env)
        self.resize(rows, cols, notify=False)
        self.output = b""

    def resize(self, rows: int, cols: int, notify: bool = True) -> None:
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        if notify:
            os.kill(self.pid, signal.SIGWINCH)

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def expect(self, token: bytes, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while token not in self.output and time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            try:
                self.output += os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
        return token in self.output

    def wait(self, timeout: float = 30) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            self.expect(b"\0never\0", timeout=0.2)  # keep draining output so the child never blocks on it
        os.kill(self.pid, signal.SIGKILL)
        return None


# A shell's job control, reduced: the session leader of a terminal runs devsy as a background job (its own process
# group, not the terminal's foreground one), reports when the job stops and why, then either brings it to the
# foreground (`fg`; or `bg`, then `fg` once a line says so) or does what bash's `kill %N` does to a stopped job
# (SIGTERM, then SIGCONT: it stays in the background). With `exit`, a shell run by the session leader runs the job and
# exits once it stopped, as a subshell that ends does: the job's group is then orphaned (the kernel hangs it up), and
# the session leader keeps the terminal until a line says `done`.
_JOB_SHELL = r"""
import os, signal, sys
then, argv = sys.argv[1], sys.argv[2:]
if then == "exit" and os.fork():
    os.wait()
    print("inner shell exited", flush=True)
    while sys.stdin.readline() not in ("done\n", ""):
        pass
    sys.exit(0)
job = os.posix_spawnp(argv[0], argv, os.environ, setpgroup=0)  # its own group from the start, as a shell does
print(f"job {job}", flush=True)
_, status = os.waitpid(job, os.WUNTRACED)
if os.WIFSTOPPED(status):
    print(f"stopped by {signal.Signals(os.WSTOPSIG(status)).name}", flush=True)
    if then == "exit":
        os._exit(0)
    if then in ("fg", "bg-fg"):
        if then == "bg-fg":  # `bg` first: continued in the background, then brought to the foreground once told
            os.killpg(job, signal.SIGCONT)
            while sys.stdin.readline() not in ("fg\n", ""):
                pass
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # the job becomes the terminal's foreground
        os.tcsetpgrp(0, job)
    else:
        while sys.stdin.readline() not in ("kill\n", ""):  # the shell reads its own input meanwhile
            pass
        os.killpg(job, signal.SIGTERM)
    os.killpg(job, signal.SIGCONT)
    _, status = os.waitpid(job, 0)
print(f"job exit {os.waitstatus_to_exitcode(status)}", flush=True)
"""


@contextlib.contextmanager
def job_shell(then: str, argv: list[str], env: dict[str, str]) -> Iterator[Terminal]:
    """_JOB_SHELL on a terminal of its own, running `argv` as its job, once it has said the job's pid; the shell and
    the job's group are killed at the end, however the test ended."""
    term = Terminal([sys.executable, "-c", _JOB_SHELL, then, *argv], env, rows=24, cols=80)
    job = None
    try:
        assert term.expect(b"\r\n", timeout=30), term.output
        job = int(term.output.split()[1])
        yield term
    finally:
        for pid in (job, term.pid):
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
