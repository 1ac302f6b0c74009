"""`devsy ssh WS` from a terminal: a login shell on a pseudo-terminal, its size, resizes, and its exit code."""

from __future__ import annotations

import signal
import subprocess
import time

import psutil
import pytest

from helpers.cli import DEVSY, cli_env
from helpers.terminal import Terminal, job_shell


_WORKSPACES = {"agent": "running_workspace", "exec": "exec_workspace", "exec-busybox": "busybox_workspace"}


@pytest.mark.parametrize("path", sorted(_WORKSPACES))
def test_interactive_shell_has_a_terminal_that_follows_resizes(request, devsy, path):
    # Every session path: the agent's pty, and exec sessions' (through the guest's `script`, or its busybox telnetd:
    # devsy/ssh/exec_terminal.py, exec_telnet.py).
    workspace = request.getfixturevalue(_WORKSPACES[path])
    env = cli_env(devsy, TERM="xterm-256color")
    term = Terminal([*DEVSY, "ssh", workspace], env, rows=31, cols=101)
    # Markers are computed by the shell ($((...))), so the echo of what we type never matches them.
    term.type('tty; echo "size=$(stty size) term=$TERM user=$(id -un) mark$((40+2))"\n')
    assert term.expect(b"mark42"), term.output
    assert b"size=31 101 term=xterm-256color user=dev mark42" in term.output
    assert b"/dev/pts/" in term.output
    term.resize(45, 132)
    # The resize travels as an SSH window-change; ask until the shell sees it (bounded).
    deadline, seen = time.monotonic() + 20, False
    while not seen and time.monotonic() < deadline:
        term.type('echo "now=$(stty size) mark$((50+1))"\n')
        seen = term.expect(b"now=45 132 mark51", timeout=2)
    assert seen, term.output
    term.type("exit 7\n")
    assert term.wait() == 7


@pytest.mark.parametrize("path", sorted(_WORKSPACES))
def test_ctrl_c_reaches_the_remote_program_not_devsy(request, devsy, path):
    workspace = request.getfixturevalue(_WORKSPACES[path])
    term = Terminal([*DEVSY, "ssh", workspace], cli_env(devsy, TERM="xterm"), rows=24, cols=80)
    # The typing shell expands $((40+2)) in the double quotes: its echo shows the expression, the trap prints 42.
    # The program waits in the shell's own `read`, not in a child: a shell defers a trap until its foreground
    # child ends, and a Ctrl-C landing between fork and exec is lost by the child, which would leave the trap
    # waiting on `sleep` for good. A trapped signal interrupts `read` itself, so the trap runs whenever it lands.
    term.type("""sh -c "trap 'echo interrupted-$((40+2)); exit 130' INT; echo wait''ing; read line"\n""")
    assert term.expect(b"waiting"), term.output
    term.type("\x03")  # in raw mode this is a byte for the remote terminal, which turns it into SIGINT
    assert term.expect(b"interrupted-42"), term.output
    term.type("exit\n")
    assert term.wait() == 130  # `exit` passes on the last status: the interrupted program's


_JOB_WORKSPACES = {"agent": "running_workspace", "exec": "exec_workspace"}
_JOB_PATHS = {"master": {}, "driver": {"DEVSY_SSH_MUX": "0"}}


@pytest.mark.parametrize("path", sorted(_JOB_WORKSPACES))
@pytest.mark.parametrize("mux", sorted(_JOB_PATHS))
@pytest.mark.parametrize("then", ["fg", "bg-fg"])
def test_a_background_session_waits_for_the_foreground(request, devsy, path, mux, then):
    """`devsy ssh WS &` stops (SIGTTOU: it would change the terminal's settings from the background), as OpenSSH
    does; brought to the foreground (at once, or after a `bg`), it is an interactive session like any other."""
    workspace = request.getfixturevalue(_JOB_WORKSPACES[path])
    with job_shell(then, [*DEVSY, "ssh", workspace], cli_env(devsy, TERM="xterm", **_JOB_PATHS[mux])) as term:
        assert term.expect(b"stopped by SIGTTOU", timeout=60), term.output
        if then == "bg-fg":
            term.type("fg\n")  # read by the job shell: the job, continued in the background, reads nothing yet
        term.type('echo "mark$((40+2))"\n')
        assert term.expect(b"mark42", timeout=60), term.output
        term.type("exit 3\n")
        assert term.expect(b"job exit 3\r\n", timeout=60), term.output  # devsy's own exit status: the session's
        assert b"Traceback" not in term.output, term.output
        assert term.wait() == 0


@pytest.mark.parametrize("path", sorted(_JOB_WORKSPACES))
@pytest.mark.parametrize("mux", sorted(_JOB_PATHS))
def test_kill_ends_a_background_session_stopped_for_its_terminal(request, devsy, path, mux):
    """`kill %N` (SIGTERM, then SIGCONT, still in the background) ends `devsy ssh WS &` stopped by SIGTTOU as SIGTERM
    ends devsy, before anything ran. The kernel's restarted tcsetattr once failed with EINTR, a traceback and exit 1
    (or stopped the job again when another thread took the signal)."""
    workspace = request.getfixturevalue(_JOB_WORKSPACES[path])
    before = _guest_processes(devsy, workspace)
    with job_shell("kill", [*DEVSY, "ssh", workspace], cli_env(devsy, TERM="xterm", **_JOB_PATHS[mux])) as term:
        assert term.expect(b"stopped by SIGTTOU", timeout=60), term.output
        term.type("kill\n")
        assert term.expect(f"job exit {128 + signal.SIGTERM}\r\n".encode(), timeout=60), term.output
        assert b"Traceback" not in term.output, term.output
        assert term.wait() == 0
    if mux == "driver":  # the master keeps its connection to the agent by design; stop and delete end it
        assert _guest_processes(devsy, workspace) == before, "the session's transport outlived it in the guest"


def _guest_processes(devsy, workspace: str) -> set[str]:
    """The guest's processes (pid and command line), but the listing's own, listed through the driver's exec."""
    listing = subprocess.run([*DEVSY, "exec", workspace, "--", "ps", "-eo", "pid=,args="], capture_output=True,
                             env=cli_env(devsy, DEVSY_SSH_MUX="0"), timeout=60, check=True)
    return {line.strip() for line in listing.stdout.decode().splitlines() if "ps -eo pid=,args=" not in line}


@pytest.mark.parametrize("mux", sorted(_JOB_PATHS))
def test_a_stopped_session_whose_shell_exits_ends_and_runs_nothing(devsy, running_workspace, mux):
    """The shell that ran `devsy ssh WS &` exits while the job is stopped for its terminal: the kernel hangs up the
    orphaned job (SIGHUP, SIGCONT) and devsy ends without a traceback and without starting the session (the terminal
    is not its to use any more: a raw mode there fails with EIO)."""
    before = _guest_processes(devsy, running_workspace)
    with job_shell("exit", [*DEVSY, "ssh", running_workspace],
                   cli_env(devsy, TERM="xterm", **_JOB_PATHS[mux])) as term:
        job = psutil.Process(int(term.output.split()[1]))
        assert term.expect(b"inner shell exited", timeout=60), term.output
        assert b"stopped by SIGTTOU" in term.output
        deadline = time.monotonic() + 60
        while not _ended(job) and time.monotonic() < deadline:
            term.expect(b"\0never\0", timeout=0.2)  # drain what it prints, so it never blocks on the terminal
        assert _ended(job), term.output
        term.type("done\n")
        assert term.wait() == 0  # drains the rest of the job's output
        assert b"Traceback" not in term.output, term.output
        # Ended as hung up (exit 129, silently), not with an error: its status is not ours to read (orphaned).
        assert b"cannot use the terminal" not in term.output, term.output
    if mux == "driver":
        assert _guest_processes(devsy, running_workspace) == before, "the session's transport outlived it"


def _ended(process: psutil.Process) -> bool:
    """Exited: gone, or a zombie its new parent has not reaped yet."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
