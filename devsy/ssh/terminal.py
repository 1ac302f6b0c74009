"""The local terminal of an interactive `devsy ssh`: raw mode while the session runs, and its size (with SIGWINCH)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import termios
import tty
from collections.abc import Callable, Iterator

from devsy import job_control
from devsy.errors import Cancelled, DevsyError
from devsy.workspace.paths import WorkspacePaths


def wants_terminal(stdin_fd: int | None, command: str | None, tty: bool) -> bool:
    """A terminal session (raw mode here, a pty in the guest): stdin is a terminal, and we run a shell or -t was
    given (as OpenSSH decides)."""
    return stdin_fd is not None and os.isatty(stdin_fd) and (command is None or tty)


def session_terminal(stdin_fd: int | None, command: str | None, tty: bool, paths: WorkspacePaths) -> bool:
    """wants_terminal, where the workspace can give one: exec sessions have none (devsy/ssh/exec_sessions.py), and
    the session then runs on pipes, after a notice, as OpenSSH does when a pty is refused."""
    if not wants_terminal(stdin_fd, command, tty):
        return False
    from devsy.agent.note import read_note  # here: a session with a command, the common case, does without (~10 ms)

    note = read_note(paths)
    if note is None or not note.exec_sessions or note.terminal:
        return True
    os.write(2, f"devsy: workspace {paths.root.name} gives its sessions no terminal ({note.why}, and its image has "
                "neither util-linux `script` nor busybox telnetd); this session runs without one\r\n"
             .encode("utf-8", "replace"))
    return False


def size(fd: int) -> tuple[int, int]:
    """(columns, rows) of the terminal on `fd`; 80x24 when it does not say."""
    try:
        columns, rows = os.get_terminal_size(fd)
    except OSError:
        return 80, 24
    return columns or 80, rows or 24


@contextlib.contextmanager
def raw_mode(fd: int, wait_cancelled: job_control.WaitCancelled) -> Iterator[None]:
    """Keys (Ctrl-C included) go to the remote terminal as bytes; the local settings come back afterwards.

    From a background job (`devsy ssh &`), changing the terminal's settings stops the job until it is brought to the
    foreground, as OpenSSH's does; a cancelling signal meanwhile (`kill %N`) raises Cancelled, and so does one that
    came as the terminal went away (a DevsyError without one). job_control.py says why devsy stops the job itself
    rather than let the kernel do it."""
    saved: list[list] = []

    def enter() -> None:
        if wait_cancelled(0):
            raise Cancelled(_NOTHING_RAN)
        settings = termios.tcgetattr(fd)  # read now: what the user set at their shell while the job waited is kept
        # TCSADRAIN, as OpenSSH does: the default TCSAFLUSH would throw away what the user typed ahead.
        tty.setraw(fd, termios.TCSADRAIN)
        saved[:] = [settings]

    try:
        entered = _change_settings(fd, enter, wait_cancelled)
    except (termios.error, job_control.TerminalLost) as exc:  # EIO: the shell that ran the job exited, or a hang-up
        # Either comes with a SIGHUP as a rule, which the cancel token may hear a moment after the loss is seen (its
        # watcher thread sets it): waited for, bounded, so a hang-up ends as one (128+1), not as an error.
        if wait_cancelled(_HANGUP_FOLLOWS_S):
            raise Cancelled(_NOTHING_RAN) from None
        reason = exc.args[1] if isinstance(exc, termios.error) and len(exc.args) > 1 else str(exc)
        raise DevsyError(f"cannot use the terminal for an interactive session: {reason}",
                         hint="run devsy ssh again from a terminal (the shell that ran this job exited, or its "
                              "terminal closed); nothing ran in the workspace") from None
    if not entered:
        raise Cancelled(_NOTHING_RAN)
    try:
        yield
    finally:
        # Left as they are when cancelled in the background: only the terminal's foreground may change them, and
        # the shell there restored its own when it took the terminal back. A terminal that hung up has nothing left
        # to restore.
        with contextlib.suppress(termios.error, job_control.TerminalLost):
            _change_settings(fd, lambda: termios.tcsetattr(fd, termios.TCSADRAIN, saved[0]), wait_cancelled)


_NOTHING_RAN = "cancelled before the session started; nothing ran in the workspace"
# How long a lost terminal waits for the SIGHUP that comes with it before it is reported as an error instead.
_HANGUP_FOLLOWS_S = 2.0


def _change_settings(fd: int, change: Callable[[], None], wait_cancelled: job_control.WaitCancelled) -> bool:
    """Make `change` to terminal `fd`'s settings as soon as our job may: at once where the kernel would not stop the
    job for it (the foreground, mostly), else once the user brings the job there. False when cancelled first."""
    while True:
        if job_control.would_stop(fd, signal.SIGTTOU):
            if wait_cancelled(0) or not job_control.stop_until_foreground(fd, signal.SIGTTOU, wait_cancelled):
                return False
            continue
        try:
            change()
            return True
        except termios.error as exc:
            # EINTR: the kernel stopped the job in the call after all (a `bg` raced the check above) and a signal
            # came as it was continued.
            if exc.args[0] != errno.EINTR:
                raise
            if wait_cancelled(0):
                return False


@contextlib.contextmanager
def on_resize(fd: int, callback: Callable[[int, int], None]) -> Iterator[None]:
    """Call `callback(columns, rows)` whenever the terminal on `fd` changes size."""

    def handler(_signum: int, _frame: object) -> None:
        callback(*size(fd))

    previous = signal.signal(signal.SIGWINCH, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGWINCH, previous)
