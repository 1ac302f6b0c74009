"""A guest command never outlives its caller: whatever ends `devsy exec` (SIGKILL, SIGHUP, a closed stdout pipe) or
its external provider (SIGKILL), the command's process tree in the workspace is gone within a bound.

Death is proven by an independent observer (`docker exec` as root: pid + start time + nonce), never by the absence
of output. The guest prints its pids on stderr once its tree runs; stdout carries whatever the case needs.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.cli import DEVSY, HOST_NET, cli_env
from helpers.projects import make_project
from helpers.streams import read_line
from fixtures.process_observer import ObservedProcess, ProcessObserver

# From the event that ends the caller to the observer seeing the whole tree dead.
ORPHAN_BOUND_S = 10.0
READY_TIMEOUT_S = 60.0
PROVIDERS = {"docker": [], "external-docker": ["--provider", "external-docker"]}


@dataclass
class LiveExec:
    proc: subprocess.Popen
    tree: list[ObservedProcess]
    observer: ProcessObserver


@pytest.fixture(params=sorted(PROVIDERS))
def workspace(request, devsy, ws_id, guest_image, tmp_path) -> str:
    devsy.up(make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "dev"}), "--id", ws_id,
             *PROVIDERS[request.param], *HOST_NET)
    return ws_id


def _start(devsy, docker_client, workspace: str, script: str, nonce: str, *, ready_on_stdout: bool = False,
           **env: str) -> LiveExec:
    """`devsy exec` of a script that prints `ready PID...` on stderr (or as its first stdout line); each PID must
    carry `nonce` in its argv. `env`: added to the CLI's environment."""
    container = docker_client.containers.list(filters={"label": f"dev.devsy.workspace={workspace}"})[0]
    observer = ProcessObserver.via_docker(container.id)
    proc = subprocess.Popen([*DEVSY, "exec", workspace, "--", "sh", "-c", script], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(devsy, **env))
    line = read_line(proc.stdout if ready_on_stdout else proc.stderr, READY_TIMEOUT_S)
    match = re.fullmatch(rb"ready ([\d ]+)\n", line)
    if not match:
        proc.kill()
        raise AssertionError(f"the guest did not report its pids: {line!r}")
    tree = [observer.identify(int(pid), nonce) for pid in match[1].split()]
    return LiveExec(proc, tree, observer)


def _sleeping_tree(nonce: str) -> str:
    # The nonce rides in argv (root may not read the environ of `dev`'s processes): the shell's text and the child's.
    return f': {nonce}; python3 -c "import time; time.sleep(4242)" {nonce} & echo "ready $$ $!" >&2; wait'


def _assert_tree_dies(live: LiveExec, since: float) -> None:
    left = live.observer.wait_dead(live.tree, timeout=max(0.0, ORPHAN_BOUND_S - (time.monotonic() - since)))
    assert left == [], f"guest processes outlived `devsy exec` by {ORPHAN_BOUND_S:.0f}s: {left}"


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _provider_pid(cli_pid: int) -> int:
    for pid in _descendants(cli_pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(arg.endswith(b"/devsy-provider-docker") for arg in argv):
            return pid
    raise AssertionError(f"no devsy-provider-docker process under the CLI (pid {cli_pid})")


def _kill_cli(live: LiveExec) -> None:
    live.proc.kill()
    live.proc.wait(timeout=ORPHAN_BOUND_S)


def _hang_up_cli(live: LiveExec) -> None:
    live.proc.send_signal(signal.SIGHUP)
    assert live.proc.wait(timeout=ORPHAN_BOUND_S) == 128 + signal.SIGHUP


ENDINGS: dict[str, Callable[[LiveExec], None]] = {"sigkill-cli": _kill_cli, "sighup-cli": _hang_up_cli}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_the_guest_tree_dies_when_the_cli_is_ended(devsy, workspace, docker_client, ending):
    nonce = f"nonce-{secrets.token_hex(8)}"
    live = _start(devsy, docker_client, workspace, _sleeping_tree(nonce), nonce)
    try:
        ended = time.monotonic()
        ENDINGS[ending](live)
        _assert_tree_dies(live, ended)
    finally:
        live.proc.kill()
        live.proc.wait(timeout=ORPHAN_BOUND_S)
    assert devsy.run("exec", workspace, "--", "echo", "next").stdout == b"next\n"  # the workspace is untouched


def test_the_guest_tree_dies_when_nobody_reads_the_output_any_more(devsy, workspace, docker_client):
    """Like `devsy exec WS -- sh -c 'head -c 20G /dev/zero | cat' | head -1`: the reader of stdout goes away."""
    nonce = f"nonce-{secrets.token_hex(8)}"
    # `yes NONCE | grep NONCE` burns CPU for ever and carries the nonce; $! is grep, $$ the shell. The ready line
    # is stdout's first (yes waits on a FIFO until it is out): on stderr it could sit behind a flood of stdout that
    # fills our unread pipe, since one connection carries both streams in order.
    gate = f"/tmp/go-{nonce}"
    script = (f': {nonce}; mkfifo {gate}; (read _ < {gate}; exec yes {nonce}) | grep --line-buffered {nonce} & '
              f'echo "ready $$ $!"; echo go > {gate}; rm -f {gate}; wait')
    live = _start(devsy, docker_client, workspace, script, nonce, ready_on_stdout=True)
    try:
        assert read_line(live.proc.stdout, READY_TIMEOUT_S) == f"{nonce}\n".encode()
        ended = time.monotonic()
        live.proc.stdout.close()  # `| head -1` has its line and exits
        live.proc.wait(timeout=ORPHAN_BOUND_S)
        _assert_tree_dies(live, ended)
    finally:
        live.proc.kill()
        live.proc.wait(timeout=ORPHAN_BOUND_S)


def test_a_tree_that_ignores_hangups_dies_when_nobody_reads_the_output(devsy, workspace, docker_client):
    """The reader of stdout goes away from a command that ignores SIGHUP and SIGPIPE (a hang-up, as OpenSSH gives a
    session, would leave it running): `devsy exec` still ends its whole tree."""
    nonce = f"nonce-{secrets.token_hex(8)}"
    script = (f': {nonce}; trap "" HUP PIPE; python3 -c "import time; time.sleep(4242)" {nonce} & '
              f'echo "ready $$ $!"; while :; do echo {nonce} || :; done')
    live = _start(devsy, docker_client, workspace, script, nonce, ready_on_stdout=True)
    try:
        ended = time.monotonic()
        live.proc.stdout.close()
        live.proc.wait(timeout=ORPHAN_BOUND_S)
        _assert_tree_dies(live, ended)
    finally:
        live.proc.kill()
        live.proc.wait(timeout=ORPHAN_BOUND_S)


@pytest.mark.parametrize("workspace", ["external-docker"], indirect=True)
def test_the_guest_tree_dies_when_the_provider_is_killed(devsy, workspace, docker_client):
    # The driver's exec, whose provider process this CLI starts (through the SSH master, the master's provider
    # carries the session: test_ssh_master.py covers a lost connection there).
    nonce = f"nonce-{secrets.token_hex(8)}"
    live = _start(devsy, docker_client, workspace, _sleeping_tree(nonce), nonce, DEVSY_SSH_MUX="0")
    try:
        ended = time.monotonic()
        os.kill(_provider_pid(live.proc.pid), signal.SIGKILL)
        code = live.proc.wait(timeout=ORPHAN_BOUND_S)
        stderr = live.proc.stderr.read().decode()
        assert code == 1, (code, stderr)
        # devsy says what happened (a typed error, no traceback), rather than dying silently with the provider.
        assert "devsy exec: error: provider devsy-provider-docker" in stderr and "Traceback" not in stderr, stderr
        _assert_tree_dies(live, ended)
    finally:
        live.proc.kill()
        live.proc.wait(timeout=ORPHAN_BOUND_S)
    assert devsy.run("exec", workspace, "--", "echo", "next").stdout == b"next\n"


# -- the same guard around a host child in its own session: `msb exec` (a stand-in here: no VM boots on this host) ---
MSB_STAND_IN = """#!/bin/sh
[ "$1" = exec ] || exit 2
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""
# An owner of one `run_exec` (what `devsy exec` does for the microsandbox driver), killed by the test.
MSB_OWNER = """
import sys
from devsy.driver.base import ExecRequest
from devsy.driver.microsandbox.exec_stream import run_exec
from devsy.driver.microsandbox.locate import MsbBinary
from devsy.driver.microsandbox.msb import MsbClient
client = MsbClient(MsbBinary(sys.argv[1], (0, 7, 11)))
run_exec(client, "ws", ExecRequest(argv=sys.argv[2:], stdout=sys.stdout.buffer, stderr=sys.stderr.buffer))
"""


def _on_host(argv: list[str]) -> tuple[int, bytes]:
    proc = subprocess.run(argv, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout


def test_a_killed_owner_of_msb_exec_leaves_no_command_behind(tmp_path):
    stand_in = tmp_path / "msb"
    stand_in.write_text(MSB_STAND_IN)
    stand_in.chmod(0o755)
    nonce = f"nonce-{secrets.token_hex(8)}"
    sleeper = f'{sys.executable} -c "import time; time.sleep(4242)" {nonce}'
    script = f': {nonce}; {sleeper} & echo "ready $$ $!" >&2; wait'
    owner = subprocess.Popen([sys.executable, "-c", MSB_OWNER, str(stand_in), "sh", "-c", script],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    observer = ProcessObserver(_on_host)
    live = LiveExec(owner, [], observer)
    try:
        line = read_line(owner.stderr, READY_TIMEOUT_S)
        match = re.fullmatch(rb"ready (\d+) (\d+)\n", line)
        assert match, line
        live.tree = [observer.identify(int(pid), nonce) for pid in match.groups()]
        ended = time.monotonic()
        _kill_cli(live)
        _assert_tree_dies(live, ended)
    finally:
        owner.kill()
        owner.wait(timeout=ORPHAN_BOUND_S)
        for process in live.tree:  # on the host, nobody else would remove what a failure left behind
            if observer.is_alive(process):
                os.kill(process.pid, signal.SIGKILL)


def test_a_command_the_engine_starts_after_its_owner_died_is_still_killed(running_workspace, docker_client,
                                                                           monkeypatch):
    """The owner asked the engine to start the command and died before it existed: the guard's first kill finds no
    tree, so it keeps killing until the engine reports the exec ended."""
    import threading

    from devsy.driver.docker import driver as docker_driver
    from devsy.driver.docker import exec_tree

    (container,) = docker_client.containers.list(filters={"label": f"dev.devsy.workspace={running_workspace}"})
    token = exec_tree.new_token()
    exec_id = docker_client.api.exec_create(container.id, exec_tree.wrap(["sleep", "300"], token))["Id"]
    first_kill_done = threading.Event()
    real_kill = docker_driver.DockerDriver.kill_tree

    def kill_then_tell(self, container_id: str, kill_token: str, kill_exec_id: str = "") -> None:
        real_kill(self, container_id, kill_token, kill_exec_id)
        first_kill_done.set()

    monkeypatch.setattr(docker_driver.DockerDriver, "kill_tree", kill_then_tell)
    guard = threading.Thread(target=docker_driver.kill_orphaned_tree, args=(container.id, token, exec_id))
    guard.start()
    try:
        assert first_kill_done.wait(READY_TIMEOUT_S), "the guard's first kill did not run"
        docker_client.api.exec_start(exec_id, detach=True)  # the command starts only now, after that first kill
        guard.join(ORPHAN_BOUND_S + docker_driver._ORPHAN_START_WAIT_S)
        assert not guard.is_alive(), "kill_orphaned_tree did not return within its bound"
        info = docker_client.api.exec_inspect(exec_id)
        assert not info["Running"] and info["ExitCode"] is not None, f"the late command survived: {info}"
    finally:
        guard.join(30)
