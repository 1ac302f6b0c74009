"""Cancelling a command on the MicroSandbox simulator ends the command's whole process tree in the sandbox.

devsy's real microsandbox driver runs each command as `msb exec --stream`; cancelling devsy (SIGINT or SIGTERM)
TERMs that msb process, and ending an msb exec session ends its command's tree in the guest. The simulator
(fixtures/msb_sim, a Docker-backed stand-in for msb) must do the same, or every cancel check on the simulator's
providers fails for the simulator's sake. It used to KILL the group with `kill -KILL -- -PGID`, which the images'
/bin/sh (dash, busybox) reject, so nothing died. Both paths are covered: `devsy exec`, and `devsy ssh --command` on
an image without python3, whose SSH sessions are driver execs too (devsy/ssh/exec_sessions.py).

Real CLI, real simulator, real Docker engine. Death is proven by an observer that bypasses devsy and msb
(`docker exec -u 0` into the sandbox's container: pid + start time + nonce), never by the absence of output.
Simulated: never MicroSandbox evidence.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devsy.driver.microsandbox.naming import sandbox_name
from fixtures.msb_sim.docker import LABEL_HOME, LABEL_SANDBOX, sweep, untag_images
from fixtures.msb_sim.state import home_key
from fixtures.process_observer import ObservedProcess, ProcessObserver
from helpers.cli import DEVSY, DevsyCli, cli_env
from helpers.streams import read_line

SIM = str(Path(sys.executable).with_name("devsy-msb-sim"))
CANCEL_BOUND_S = 10.0  # devsy's exit and the tree's death, from the signal (the catalogue's bound)
READY_TIMEOUT_S = 60.0
# (signal, to devsy's whole group as a terminal's Ctrl-C does, or to devsy alone as a supervisor's `kill` does)
CANCELS = ((signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, False))


def _tree_command(nonce: str) -> str:
    """A shell that waits for a child shell that waits for a sleep: three levels, each carrying the nonce (the two
    shells in argv, the sleep in its environment; the observer is root, the commands run as root), printed as
    `ready NONCE SHELL CHILD GRANDCHILD` once all three run. No shell's `-c` text ends in the command it starts,
    so none of them execs it in place."""
    child = "DEVSY_TEST_NONCE=$0 sleep 4242 & echo \"ready $0 $PPID $$ $!\"; wait"
    return f": {nonce}; sh -c '{child}' {nonce} & wait"


@pytest.fixture
def sim_cli(tmp_path: Path, docker_client) -> Iterator[DevsyCli]:
    """The devsy CLI with MSB_PATH at the simulator and a private MSB_HOME (short: msb's socket paths must stay
    under 108 bytes); afterwards its workspaces are deleted and whatever a failure left is swept by label."""
    home = Path(tempfile.mkdtemp(prefix="msbsim-", dir="/tmp"))
    cli = DevsyCli(home=tmp_path / "home", ssh_config=tmp_path / "ssh" / "config",
                   env={"MSB_PATH": SIM, "MSB_HOME": str(home)})
    yield cli
    try:
        for workspace_id in cli.created:
            cli.run("delete", workspace_id, timeout=300)
    finally:
        key = home_key(home)
        sweep(key)
        untag_images(key)
        shutil.rmtree(home, ignore_errors=True)


def _up(cli: DevsyCli, image: str) -> str:
    workspace_id = f"xc-{secrets.token_hex(4)}"
    cli.created.add(workspace_id)
    up = cli.run("up", image, "--id", workspace_id, "--provider", "microsandbox", "--json", timeout=600)
    assert up.returncode == 0, up.text
    return workspace_id


def _container(cli: DevsyCli, workspace_id: str) -> str:
    """The Docker container behind the workspace's sandbox, found by the simulator's labels (not through devsy)."""
    key = home_key(Path(cli.env["MSB_HOME"]))
    listed = subprocess.run(["docker", "ps", "-q", "--filter", f"label={LABEL_HOME}={key}",
                             "--filter", f"label={LABEL_SANDBOX}={sandbox_name(workspace_id)}"],
                            capture_output=True, text=True, timeout=60, check=True)
    ids = listed.stdout.split()
    assert len(ids) == 1, f"expected one running container for {workspace_id}, found {ids}"
    return ids[0]


def _started_at(container: str) -> str:
    return subprocess.run(["docker", "inspect", "--format", "{{.State.StartedAt}}", container], capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()


def _cancel_kills_the_tree(cli: DevsyCli, workspace_id: str, argv_for: Callable[[str], list[str]]) -> None:
    """For each way of cancelling: start the tree through `argv_for(command)`, identify its three processes, signal
    devsy; devsy must exit 128+signal and the three must be dead, both within CANCEL_BOUND_S of the signal. The
    sandbox keeps running (same container, same start) and takes the next command."""
    container = _container(cli, workspace_id)
    started = _started_at(container)
    observer = ProcessObserver.via_docker(container)
    for signum, group in CANCELS:
        nonce = f"nonce-{secrets.token_hex(8)}"
        proc = subprocess.Popen(argv_for(_tree_command(nonce)), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=cli_env(cli), start_new_session=True)
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = read_line(proc.stdout, READY_TIMEOUT_S)
            match = re.fullmatch(rb"ready " + nonce.encode() + rb" (\d+) (\d+) (\d+)\n", line)
            assert match, (line, proc.stderr.read() if proc.poll() is not None else b"(still running)")
            tree: list[ObservedProcess] = [observer.identify(int(pid), nonce) for pid in match.groups()]
            signalled = time.monotonic()
            if group:
                os.killpg(proc.pid, signum)
            else:
                proc.send_signal(signum)
            code = proc.wait(timeout=CANCEL_BOUND_S)
            assert code == 128 + signum, (code, proc.stderr.read())
            left = max(0.0, CANCEL_BOUND_S - (time.monotonic() - signalled))
            alive = observer.wait_dead(tree, timeout=left)
            how = f"{signal.Signals(signum).name} to devsy{'s group' if group else ''}"
            assert alive == [], f"guest processes alive {CANCEL_BOUND_S:g}s after {how}: {alive}"
        finally:
            with_group_killed(proc)
    assert _container(cli, workspace_id) == container and _started_at(container) == started, "the sandbox restarted"
    after = cli.run("exec", workspace_id, "--", "/bin/sh", "-c", "echo next")
    assert (after.returncode, after.stdout) == (0, b"next\n"), after.text


def with_group_killed(proc: subprocess.Popen) -> None:
    """Whatever an assertion left of devsy's group goes (a no-op after a clean cancel), and the child is reaped."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=CANCEL_BOUND_S)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@pytest.mark.docker
def test_cancelled_devsy_exec_ends_the_guest_tree(sim_cli: DevsyCli, guest_image: str) -> None:
    workspace_id = _up(sim_cli, guest_image)
    _cancel_kills_the_tree(sim_cli, workspace_id,
                           lambda command: [*DEVSY, "exec", workspace_id, "--", "/bin/sh", "-c", command])


@pytest.fixture(scope="session")
def nopython_image(docker_client) -> str:
    from fixtures.guest_image import GUEST_IMAGES, NOPYTHON_IMAGE_TAG, ensure_guest_image

    return ensure_guest_image(tag=NOPYTHON_IMAGE_TAG, recipe=GUEST_IMAGES[NOPYTHON_IMAGE_TAG],
                              progress=lambda _line: None).tag


@pytest.mark.docker
def test_cancelled_ssh_command_without_python_ends_the_guest_tree(sim_cli: DevsyCli, nopython_image: str) -> None:
    workspace_id = _up(sim_cli, nopython_image)
    status = sim_cli.run("status", workspace_id, "--json")
    assert status.json["workspace"]["ssh_path"] == "exec", status.text  # sessions are driver execs here
    _cancel_kills_the_tree(sim_cli, workspace_id,
                           lambda command: [*DEVSY, "ssh", workspace_id, "--command", command])
