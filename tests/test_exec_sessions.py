"""Exec sessions (devsy/ssh/exec_sessions.py): `devsy ssh` and `ssh <id>.devsy` in an image with no python3, on the
real engine through the real CLI and the real OpenSSH client. Guest processes are observed independently (docker
exec, pid + start time + nonce), never by the absence of output: cancellation is in test_ssh_cancel.py, terminals in
test_ssh_interactive.py, ssh -L in test_port_forward.py, each for both session paths."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import signal
import subprocess

import pytest

from helpers.cli import HOST_NET, cli_env
from fixtures.process_observer import ProcessObserver
from helpers.projects import make_project
from helpers.streams import read_line

MIB = 1 << 20
SSH_TIMEOUT_S = 120


def _openssh_command(devsy, ws_id: str, command: str, *options: str, input: bytes = b""):
    return subprocess.run(["ssh", "-F", str(devsy.ssh_config), *options, f"{ws_id}.devsy", command], input=input,
                          capture_output=True, timeout=SSH_TIMEOUT_S, env=cli_env(devsy))


def test_status_names_the_path(devsy, exec_workspace, running_workspace):
    status = devsy.run("status", exec_workspace, "--json").json["workspace"]
    assert status["ssh_path"] == "exec"
    human = devsy.run("status", exec_workspace).stdout.decode()
    assert "ssh: exec sessions from the host" in human and "no python3" in human, human
    agent = devsy.run("status", running_workspace, "--json").json["workspace"]
    assert agent["ssh_path"] == "agent"  # an image with python3 keeps the agent
    assert "ssh: devsy's agent in the guest" in devsy.run("status", running_workspace).stdout.decode()


@pytest.mark.parametrize("mux", ["1", "0"], ids=["ssh-master", "own-connection"])
def test_streams_are_exact(devsy, exec_workspace, mux):
    env = {"DEVSY_SSH_MUX": mux}
    data = bytes(range(256)) + b"\r\n\x00SSH-2.0-fake\r\n~.\x03\x04" + os.urandom(4 * MIB)
    roundtrip = devsy.run("ssh", exec_workspace, "--command", "cat", input=data, extra_env=env)
    assert roundtrip.returncode == 0, roundtrip.stderr[-2000:]
    assert hashlib.sha256(roundtrip.stdout).digest() == hashlib.sha256(data).digest()
    assert roundtrip.stderr == b""

    split = devsy.run("ssh", exec_workspace, "--command", r"printf 'o\000ut'; printf 'e\000rr' >&2; exit 7",
                      extra_env=env)
    assert (split.returncode, split.stdout, split.stderr) == (7, b"o\x00ut", b"e\x00rr")

    killed = devsy.run("ssh", exec_workspace, "--command", "kill -TERM $$", extra_env=env)
    assert killed.returncode == 128 + signal.SIGTERM, killed.text


def test_session_is_the_users_with_remote_env(devsy, exec_workspace):
    command = 'echo "$(id -un) $HOME $USER $PWD ${GONE-unset} $GREETING"'
    expected = b"dev /home/dev dev /workspaces/no-python unset hello from remoteEnv\n"
    own = devsy.run("ssh", exec_workspace, "--command", command)
    assert (own.returncode, own.stdout) == (0, expected), own.text
    # OpenSSH sends no remoteEnv: the proxy's server gives it to every session, nulls included.
    through_openssh = _openssh_command(devsy, exec_workspace, command)
    assert (through_openssh.returncode, through_openssh.stdout) == (0, expected), through_openssh.stderr
    root = devsy.run("ssh", exec_workspace, "--user", "root", "--command", 'echo "$(id -u) $HOME"')
    assert root.stdout == b"0 /root\n", root.text
    explicit = devsy.run("ssh", exec_workspace, "--env", "GONE=back", "--command", 'echo "$GONE"')
    assert explicit.stdout == b"back\n", explicit.text  # --env wins over a remoteEnv null


def test_openssh_client_streams_and_status(devsy, exec_workspace):
    data = os.urandom(2 * MIB)
    cat = _openssh_command(devsy, exec_workspace, "cat", input=data)
    assert cat.returncode == 0, cat.stderr
    assert hashlib.sha256(cat.stdout).digest() == hashlib.sha256(data).digest()
    status = _openssh_command(devsy, exec_workspace, "echo out; echo err >&2; exit 42")
    assert (status.returncode, status.stdout, status.stderr) == (42, b"out\n", b"err\n")


def test_a_terminal_through_the_guests_script(devsy, exec_workspace):
    # OpenSSH's -tt: a pty request the exec path grants through util-linux `script` in the guest.
    tty = _openssh_command(devsy, exec_workspace, 'tty; echo "size=$(stty size) term=$TERM"; exit 5', "-tt")
    assert tty.returncode == 5, tty
    assert re.search(rb"/dev/pts/\d+\r\nsize=\d+ \d+ term=\S+", tty.stdout), tty.stdout


def test_busybox_image_sessions_and_their_terminal(devsy, busybox_workspace):
    ws_id = busybox_workspace
    assert "terminals through /bin/busybox telnetd" in devsy.run("status", ws_id).stdout.decode()
    data = os.urandom(MIB)
    cat = devsy.run("ssh", ws_id, "--command", "cat", input=data)
    assert (cat.returncode, hashlib.sha256(cat.stdout).digest()) == (0, hashlib.sha256(data).digest()), cat.stderr
    status = _openssh_command(devsy, ws_id, "echo out; echo err >&2; exit 9")
    assert (status.returncode, status.stdout, status.stderr) == (9, b"out\n", b"err\n")
    # OpenSSH's -tt: a pty from the guest's busybox telnetd, in the workspace folder, tabs given through as sshd's
    # pty does, the exit status of the command, and nothing of telnet's on the way (negotiation, banner, markers).
    # (Its size, unknown here without a local terminal, is in test_ssh_interactive.py.)
    tty = _openssh_command(devsy, ws_id, 'tty; echo "term=$TERM at=$PWD"; printf "a\\tb\\n"; exit 5', "-tt")
    assert tty.returncode == 5, tty
    assert re.fullmatch(rb"/dev/pts/\d+\r\nterm=\S+ at=/workspaces/busybox\r\na\tb\r\n", tty.stdout), tty


def _raw_terminal_roundtrip(devsy, ws_id: str, chunks: list[bytes]) -> tuple[int, bytes, bytes]:
    """Send `chunks` (each its own write) to `head -c TOTAL | od` on a raw, echo-less pty through OpenSSH's -tt;
    (exit code, the bytes the command read as od prints them, stderr)."""
    total = sum(len(chunk) for chunk in chunks)
    command = f"stty raw -echo; echo go; head -c {total} | od -An -v -tx1"
    proc = subprocess.Popen(["ssh", "-F", str(devsy.ssh_config), "-tt", "-e", "none", f"{ws_id}.devsy", command],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(devsy))
    try:
        # Only once the pty is raw: what arrives before `stty raw` would be cooked by the line discipline.
        assert read_line(proc.stdout) == b"go\n", proc  # raw: no output processing either
        for chunk in chunks:
            proc.stdin.write(chunk)
            proc.stdin.flush()
        out, err = proc.communicate(timeout=SSH_TIMEOUT_S)
    finally:
        proc.kill()
    return proc.returncode, bytes.fromhex(out.decode()), err


@pytest.mark.parametrize("mode", ["keys", "paste"])
def test_busybox_terminal_input_arrives_exactly(devsy, busybox_workspace, mode):
    # telnet's rules (IAC doubled; telnetd drops the LF or NUL after a CR, and a read's last NUL) must leave typed
    # keys (NULs, CR, CR LF, 0xFF, each key its own write) and a pasted text (3000 lines, CR-ended as a terminal
    # pastes them, and every other byte value but NUL) exactly as sent.
    if mode == "keys":
        chunks = [b"\x00", b"a", b"\r", b"\n", b"\x00", b"\xff", b"\r\x00", b"\r\n", b"b\x00", b"\r"]
    else:
        chunks = [b"".join(b"echo line %d\r" % n for n in range(3000)) + bytes(range(1, 256)) * 16 + b"\r\n" * 500]
    code, received, err = _raw_terminal_roundtrip(devsy, busybox_workspace, chunks)
    assert code == 0, err
    assert received == b"".join(chunks)


def test_busybox_terminal_runs_its_login_program_where_it_can(devsy, busybox_workspace):
    # /dev/shm is writable but noexec in a container: telnetd could not exec its login program there, so the next
    # folder (HOME) is used; with no folder left, a clear refusal (exit 125), and nothing is left behind.
    def with_env(env: str):
        return _openssh_command(devsy, busybox_workspace, "echo ok; exit 3", "-tt", "-o", f"SetEnv={env}")

    fallback = with_env("TMPDIR=/dev/shm")
    assert (fallback.returncode, fallback.stdout) == (3, b"ok\r\n"), fallback
    refused = with_env("TMPDIR=/dev/shm HOME=/proc")
    assert refused.returncode == 125 and b"read-only or mounted noexec" in refused.stderr, refused
    leftover = _openssh_command(devsy, busybox_workspace, "ls -a /dev/shm /tmp /home/dev | grep devsy-pty")
    assert leftover.stdout == b"", leftover


def test_busybox_terminal_session_is_killed_with_its_client(devsy, docker_client, busybox_workspace):
    # The client goes away (SIGKILL: nothing of it says goodbye): the session's whole tree in the guest (telnetd, its
    # login program, the shell and its child) is killed, as for a session without a terminal.
    container = docker_client.containers.list(filters={"label": f"dev.devsy.workspace={busybox_workspace}"})[0]
    observer = ProcessObserver.via_docker(container.id)
    nonce = f"nonce-{secrets.token_hex(8)}"
    command = f': {nonce}; sh -c "sleep 4242; :" {nonce} & echo "ready $$ $!"; wait'
    proc = subprocess.Popen(["ssh", "-F", str(devsy.ssh_config), "-tt", f"{busybox_workspace}.devsy", command],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(devsy))
    try:
        match = re.fullmatch(rb"ready (\d+) (\d+)\r\n", read_line(proc.stdout))
        assert match, proc
        tree = [observer.identify(int(match[1]), nonce), observer.identify(int(match[2]), nonce)]
        proc.kill()
        assert observer.wait_dead(tree, timeout=20) == []
    finally:
        proc.kill()
        proc.wait()
    # Its private folder for telnetd's login program went with it (the program removes it as its first step).
    leftover = container.exec_run(["/bin/sh", "-c", "ls -d /tmp/devsy-pty-* 2>/dev/null"]).output
    assert leftover == b"", leftover


def test_no_terminal_where_the_image_has_neither_script_nor_telnetd(devsy, busybox_without_telnetd_image, tmp_path):
    ws_id = f"nt-{secrets.token_hex(4)}"
    devsy.created.add(ws_id)
    up = devsy.up(busybox_without_telnetd_image, "--id", ws_id, *HOST_NET)
    assert up.json["workspace"]["ssh_path"] == "exec", up.text
    assert "without a terminal (neither script nor busybox telnetd)" in up.stderr.decode()
    human_status = devsy.run("status", ws_id).stdout.decode()
    assert "no terminal (the image has neither `script` nor busybox telnetd)" in human_status, human_status
    status = _openssh_command(devsy, ws_id, "echo out; exit 9")
    assert (status.returncode, status.stdout) == (9, b"out\n"), status
    # A pty it cannot give is refused, as sshd refuses one: fatal for OpenSSH's explicit -tt, its documented rule.
    forced = _openssh_command(devsy, ws_id, "true", "-tt", "-o", "LogLevel=info")
    assert forced.returncode == 255 and b"PTY allocation request failed" in forced.stderr, forced
    devsy.run("delete", ws_id)


def test_an_image_without_a_shell_comes_up(devsy, no_shell_image, tmp_path):
    ws_id = f"ns-{secrets.token_hex(4)}"
    devsy.created.add(ws_id)
    up = devsy.up(make_project(tmp_path / "no-shell", {"image": no_shell_image, "overrideCommand": False}),
                  "--id", ws_id, *HOST_NET)
    assert up.json["workspace"]["ssh_path"] == "exec", up.text
    assert f"workspace {ws_id} has no usable /bin/sh" in devsy.run("status", ws_id).stdout.decode()
    # Sessions need the shell: a clear failure (the engine's message, which Docker writes on the exec's output stream,
    # and exit 126), nothing hangs.
    session = devsy.run("ssh", ws_id, "--command", "true")
    assert session.returncode == 126 and "/bin/sh" in session.text, session.text
    assert devsy.run("delete", ws_id).returncode == 0
