"""`devsy exec` in an image without /bin/sh (Docker): the argv runs as given, streams and exit status are the
command's, and a cancelled (or orphaned) command's tree is killed from the host.

Which processes run in the container is read from the engine (`docker top`), an observer independent of devsy.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
import subprocess
import threading

import pytest

from devsy.bounded_wait import wait_until
from devsy.driver.base import ExecRequest
from devsy.driver.docker.driver import DockerDriver
from helpers.cli import DEVSY, HOST_NET, cli_env
from helpers.projects import make_project

MIB = 1024 * 1024
# From the cancel (or the owner's death) to the engine listing no process of the command's tree.
KILL_BOUND_S = 15.0
# The command's tree: a shell, a child, and a subshell that ignores TERM with a grandchild; "ready" once it forked
# them (the test then waits for the engine to list both sleeps).
_TREE = ["/bin/busybox", "ash", "-c",
         "/bin/busybox sleep 301 & (trap '' TERM; /bin/busybox sleep 302 & wait) & echo ready; wait"]


@pytest.fixture
def no_shell_workspace(devsy, no_shell_image, tmp_path) -> str:
    ws_id = f"ds-{secrets.token_hex(4)}"
    devsy.up(make_project(tmp_path / "no-shell", {"image": no_shell_image, "overrideCommand": False}),
             "--id", ws_id, *HOST_NET)
    return ws_id


def _container(docker_client, ws_id: str):
    (container,) = docker_client.containers.list(filters={"label": f"dev.devsy.workspace={ws_id}"})
    return container


def _commands(container) -> list[str]:
    return [row[-1] for row in container.top()["Processes"]]


def _tree_running(container) -> bool:
    return any("sleep 30" in command for command in _commands(container))


def _wait_tree_started(container) -> None:
    wait_until(lambda: {"/bin/busybox sleep 301", "/bin/busybox sleep 302"} <= set(_commands(container)),
               timeout=30, interval=0.05, what="the command's tree to start")


def test_exec_streams_and_status_without_a_shell(devsy, no_shell_workspace):
    data = os.urandom(MIB)
    cat = devsy.run("exec", no_shell_workspace, "--", "/bin/busybox", "cat", input=data)
    assert (cat.returncode, hashlib.sha256(cat.stdout).digest()) == (0, hashlib.sha256(data).digest()), cat.stderr
    split = devsy.run("exec", no_shell_workspace, "--", "/bin/busybox", "ash", "-c", "echo out; echo err >&2; exit 7")
    assert (split.returncode, split.stdout, split.stderr) == (7, b"out\n", b"err\n")
    env = devsy.run("exec", no_shell_workspace, "--env", "SEEN=yes", "--workdir", "/etc", "--",
                    "/bin/busybox", "ash", "-c", 'echo "$SEEN $(/bin/busybox pwd)"')
    assert env.stdout == b"yes /etc\n", env.text


def test_a_cancelled_command_tree_is_killed_from_the_host(no_shell_workspace, docker_client):
    container = _container(docker_client, no_shell_workspace)
    ready = threading.Event()

    class Output:
        def write(self, data: bytes) -> None:
            if b"ready" in data:
                ready.set()

        def flush(self) -> None:
            pass

    request = ExecRequest(argv=_TREE, stdout=Output(), stderr=Output())  # type: ignore[arg-type]
    results = []
    runner = threading.Thread(target=lambda: results.append(DockerDriver().exec(no_shell_workspace, request)))
    runner.start()
    try:
        assert ready.wait(60), "the command never said ready"
        _wait_tree_started(container)
        request.cancel.cancel()
        runner.join(KILL_BOUND_S)
        assert not runner.is_alive(), "exec did not return after its cancel"
        assert results[0].exit_code == 130
        assert not _tree_running(container), _commands(container)
        assert _commands(container) == ["/bin/busybox sleep 86400"]  # the workspace itself keeps running
    finally:
        request.cancel.cancel()
        runner.join(KILL_BOUND_S)


def test_a_command_whose_devsy_exec_is_killed_dies_with_it(devsy, no_shell_workspace, docker_client):
    container = _container(docker_client, no_shell_workspace)
    owner = subprocess.Popen([*DEVSY, "exec", no_shell_workspace, "--", *_TREE], stdout=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, env=cli_env(devsy))
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline() == b"ready\n"  # bounded: the command prints it at once, or devsy exits (EOF)
        _wait_tree_started(container)
        owner.send_signal(signal.SIGKILL)  # no cleanup of its own: only its exec guard is left to kill the tree
        owner.wait(KILL_BOUND_S)
        wait_until(lambda: not _tree_running(container), timeout=KILL_BOUND_S, interval=0.1,
                   what="the orphaned command's tree to be killed")
    finally:
        owner.kill()
        owner.wait(KILL_BOUND_S)
