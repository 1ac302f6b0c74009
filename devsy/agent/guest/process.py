"""Starting a session's process as its user: through the user's shell, with pipes or a pseudo-terminal; or, for
`devsy exec` (an argv@devsy request), its argv exactly, as a driver's exec runs it."""

from __future__ import annotations

import fcntl
import grp
import json
import os
import signal
import struct
import subprocess
import termios
from dataclasses import dataclass, field
from typing import Optional

from .accounts import Account

# Variables of the agent's own process that must not leak into sessions.
# The env request naming variables to unset (newline-separated); devsy/devcontainer/session_env.py sends it.
UNSET_REQUEST = "DEVSY_UNSET_ENV"
# The agent's own variable holding every session's remoteEnv as JSON {"set": {..}, "unset": [..]}: given where the
# client is OpenSSH (`ssh <id>.devsy`), which sends no remoteEnv of its own. Kept apart from the agent's own PATH.
SESSION_ENV = "DEVSY_SESSION_ENV"
# The guest's LC_CTYPE as the host's launcher found it (devsy/agent/install.py): "" none, else "set:" and its value.
# This process's own may be Python's (PEP 538 locale coercion), which an argv session must not inherit.
GUEST_LC_CTYPE = "DEVSY_AGENT_LC_CTYPE"
_AGENT_ONLY = ("DEVSY_AGENT_CACHE", "DEVSY_AGENT_LOG", SESSION_ENV, GUEST_LC_CTYPE)


@dataclass(frozen=True)
class PtySpec:
    term: str
    cols: int
    rows: int
    width_px: int = 0
    height_px: int = 0


@dataclass
class SessionSpec:
    command: Optional[str]  # None: an interactive login shell (unless argv is given)
    workdir: str = ""
    env: dict = field(default_factory=dict)
    pty: Optional[PtySpec] = None
    # `devsy exec`: this argv, found on the session's PATH, in exactly `workdir` (the account's home when empty);
    # the environment is the container's, HOME the account's and PWD the directory, as the driver's exec gives it.
    argv: Optional[list] = None


class StartError(OSError):
    """A session's process cannot start; `exit_code` is what the client is told (a shell's 126/127 for argv)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Spawned:
    proc: subprocess.Popen
    stdin_fd: int
    stdout_fd: int
    stderr_fd: Optional[int]  # None with a pty: everything arrives on the terminal
    master_fd: Optional[int] = None


def _launch_session_env() -> dict:
    try:
        value = json.loads(os.environ.get(SESSION_ENV, "{}"))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def session_env(account: Account, spec: SessionSpec, cwd: str) -> dict:
    """The container's environment (as exec gave it to us), made the user's, plus what the client asked for."""
    env = {k: v for k, v in os.environ.items() if k not in _AGENT_ONLY}
    if spec.argv is None:
        env.update(HOME=account.home, USER=account.name, LOGNAME=account.name, SHELL=account.shell, PWD=cwd)
    else:  # no login: what an engine's exec sets
        env.update(HOME=account.home, PWD=cwd)
        _restore_lc_ctype(env)
    remote = _launch_session_env()
    for name in remote.get("unset", []):
        env.pop(name, None)
    env.update(remote.get("set", {}))
    # remoteEnv's nulls: an SSH env request can only set, so the client names what to unset in this one.
    for name in spec.env.get(UNSET_REQUEST, "").split("\n"):
        env.pop(name, None)
    env.update((k, v) for k, v in spec.env.items() if k != UNSET_REQUEST)
    if spec.pty is not None:
        env["TERM"] = spec.pty.term or env.get("TERM", "xterm")
    return env


def _restore_lc_ctype(env: dict) -> None:
    guest = os.environ.get(GUEST_LC_CTYPE)
    if guest is None:
        return  # started by a launcher that does not say: keep what there is
    if guest.startswith("set:"):
        env["LC_CTYPE"] = guest[len("set:"):]
    else:
        env.pop("LC_CTYPE", None)


def _argv(account: Account, spec: SessionSpec) -> list:
    if spec.argv is not None:
        return list(spec.argv)
    if spec.command is None:
        return ["-" + os.path.basename(account.shell)]  # a leading '-' makes it a login shell, as sshd does
    return [os.path.basename(account.shell), "-c", spec.command]


def _cwd(account: Account, workdir: str) -> str:
    for candidate in (workdir, account.home, "/"):
        if candidate and os.path.isdir(candidate):
            return candidate
    return "/"


def spawn(account: Account, spec: SessionSpec) -> Spawned:
    """Start the session's process; OSError if it cannot start (its message is shown to the client)."""
    if spec.argv is not None:
        return _spawn_argv(account, spec)
    cwd = _cwd(account, spec.workdir)
    try:
        return _spawn(account, spec, cwd)
    except PermissionError:
        if cwd == account.home:
            raise
        # The workspace folder is not accessible to this user: start in the home directory, as sshd would.
        return _spawn(account, spec, _cwd(account, ""))


def _spawn_argv(account: Account, spec: SessionSpec) -> Spawned:
    """An argv session: no fallback directory (an engine's exec fails on a missing one too) and a shell's exit codes
    for what cannot start: 127 not found, 126 anything else."""
    cwd = spec.workdir or account.home or "/"
    if not os.path.isdir(cwd):
        raise StartError("cannot run in %s: no such directory in the workspace" % cwd, 126)
    try:
        return _spawn(account, spec, cwd)
    except FileNotFoundError as exc:
        raise StartError("%s: command not found (%s)" % (spec.argv[0], exc.strerror), 127) from None
    except OSError as exc:
        raise StartError("cannot run %s: %s" % (spec.argv[0], exc.strerror or exc), 126) from None


def _spawn(account: Account, spec: SessionSpec, cwd: str) -> Spawned:
    argv, env, identity = _argv(account, spec), session_env(account, spec, cwd), account.popen_identity()
    # A shell session starts the account's shell (argv[0] is its name, or "-name" for a login); an argv one runs
    # argv[0] as found on the session's PATH.
    executable = account.shell if spec.argv is None else None
    if spec.pty is None:
        proc = subprocess.Popen(argv, executable=executable, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, bufsize=0, cwd=cwd, env=env, start_new_session=True,
                                **identity)
        return Spawned(proc, proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno())
    master, slave = os.openpty()
    try:
        resize(slave, spec.pty.cols, spec.pty.rows, spec.pty.width_px, spec.pty.height_px)
        _give_terminal(slave, account)
        proc = subprocess.Popen(argv, executable=executable, stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                                env=env, start_new_session=True, preexec_fn=_acquire_controlling_terminal,
                                **identity)
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    return Spawned(proc, master, master, None, master_fd=master)


def _acquire_controlling_terminal() -> None:
    # Runs in the child after setsid(): make the pty (now fd 0) its controlling terminal, so job control and
    # /dev/tty work and closing the session hangs it up.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _give_terminal(slave: int, account: Account) -> None:
    # Like sshd: the user owns their terminal (group tty, mode 0620), so tools that check it (mesg, script) work.
    if os.geteuid() != 0 or account.uid == 0:
        return
    try:
        tty_gid = grp.getgrnam("tty").gr_gid
    except KeyError:
        tty_gid = -1
    os.fchown(slave, account.uid, tty_gid)
    os.fchmod(slave, 0o620)


def resize(fd: int, cols: int, rows: int, width_px: int = 0, height_px: int = 0) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, width_px, height_px))


def _process_table() -> list:
    """(pid, parent pid, session id) of every process, from /proc/*/stat (fields 4 and 6; the name may hold spaces)."""
    table = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it exited while we looked
        table.append((int(entry), int(fields[1]), int(fields[3])))
    return table


def process_tree(root: int) -> set:
    """`root`'s session: `root` (a session leader: sessions start with setsid), its descendants, and what is still
    in its session after `root` exited and its children were handed to init (`sleep 600 &` in a finished shell)."""
    table = _process_table()
    children: dict = {}
    tree = {root}
    for pid, parent, session in table:
        children.setdefault(parent, []).append(pid)
        if session == root:
            tree.add(pid)
    pending = list(tree)
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in tree:
                tree.add(child)
                pending.append(child)
    return tree


def kill_tree(root: int) -> int:
    """SIGKILL `root`'s session and descendants (see process_tree); returns how many were signalled.

    Everything found is frozen (SIGSTOP), and the tree walked again until no new process shows up, so nothing can
    fork a child we miss between the look and the kill. A process that started a session of its own after leaving
    the tree (a daemon whose parent exited) is not ours to find, as with any tree kill.
    """
    def signal_all(pids, number: int) -> None:
        for pid in pids:
            try:
                os.kill(pid, number)
            except OSError:
                pass  # gone already

    frozen: set = set()
    for _ in range(100):  # each round freezes what it found; a fork bomb cannot keep this going past the bound
        found = process_tree(root) - frozen
        if not found:
            break
        signal_all(found, signal.SIGSTOP)
        frozen |= found
    signal_all(frozen, signal.SIGKILL)
    return len(frozen)
