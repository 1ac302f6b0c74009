"""The local terminal of an interactive `devsy ssh`: raw mode while the session runs, and its size (with SIGWINCH)."""

from __future__ import annotations

import contextlib
import os
import signal
import termios
import tty
from collections.abc import Callable, Iterator

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
def raw_mode(fd: int) -> Iterator[None]:
    """Keys (Ctrl-C included) go to the remote terminal as bytes; the local settings come back afterwards."""
    saved = termios.tcgetattr(fd)
    # TCSADRAIN, as OpenSSH does: the default TCSAFLUSH would throw away what the user typed ahead.
    tty.setraw(fd, termios.TCSADRAIN)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


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
