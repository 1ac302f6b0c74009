"""A `devsy ssh` session the SSH master runs as its own driver exec (a guest without python3, no terminal) that the
driver cannot start ends with the driver's own message and exit status, as `devsy exec` does, and the master's log
says so. The real CLI, the real engine: a paused container refuses new execs."""

from __future__ import annotations

import pytest

from helpers.engine import containers_of

pytestmark = pytest.mark.docker


def test_an_exec_the_driver_refuses_is_the_sessions_error_and_is_logged(devsy, exec_workspace, docker_client):
    assert devsy.run("ssh", exec_workspace, "--command", "true").returncode == 0  # the master is up
    [container] = containers_of(docker_client, exec_workspace)
    log = devsy.home / "workspaces" / exec_workspace / "ssh-master.log"
    container.pause()
    try:
        ssh = devsy.run("ssh", exec_workspace, "--command", "true", timeout=120)
        logged = log.read_text()  # before `devsy exec`, whose session goes through the master too
        exec_ = devsy.run("exec", exec_workspace, "--", "true", timeout=120)
    finally:
        container.unpause()
    assert ssh.returncode == exec_.returncode == 1, ssh.text + exec_.text
    assert "paused" in ssh.stderr.decode(), ssh.text
    assert [line for line in logged.splitlines() if "a session's exec failed" in line and "paused" in line], logged
