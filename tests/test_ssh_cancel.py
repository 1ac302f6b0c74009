"""Cancellation and logs on the real engine. Process death is proven by an independent observer (docker exec,
pid + start time + nonce), never by the absence of output."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import time

import pytest

from helpers.cli import DEVSY, HOST_NET, cli_env
from helpers.projects import make_project
from helpers.streams import read_line
from fixtures.process_observer import ProcessObserver

CANCEL_BOUND_S = 10.0


def _container(docker_client, workspace: str):
    return docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={workspace}"})[0]


def _identity(container) -> tuple[str, str]:
    container.reload()
    return container.attrs["Created"], container.attrs["State"]["StartedAt"]


# Each session path: the agent's (its child python3) and exec sessions' in an image without python3 (a shell child;
# `; :` keeps that shell, with the nonce in its argv, from exec'ing sleep).
_PATHS = {"agent": ("running_workspace", "running-project", 'python3 -c "import time; time.sleep(4242)"'),
          "exec": ("exec_workspace", "no-python", 'sh -c "sleep 4242; :"')}


@pytest.mark.parametrize("client", ["ssh", "exec"])
@pytest.mark.parametrize("path", sorted(_PATHS))
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_cancel_kills_the_ready_tree_not_the_instance(request, devsy, docker_client, tmp_path, signum, path, client):
    fixture, project, child = _PATHS[path]
    running_workspace = request.getfixturevalue(fixture)
    container = _container(docker_client, running_workspace)
    before = _identity(container)
    observer = ProcessObserver.via_docker(container.id)
    nonce = f"nonce-{secrets.token_hex(8)}"
    marker = tmp_path / project / "kept.txt"
    marker.write_text("content")
    # The nonce rides in argv (root may not read another user's environ without CAP_SYS_PTRACE): in the shell's
    # `-c` text and as an argument of its child.
    command = f': {nonce}; {child} {nonce} & echo "ready $$ $!"; wait'
    # `devsy exec` without an agent in the guest: the SSH master's driver exec (mux/driver_session.py).
    argv = ["ssh", running_workspace, "--command", command] if client == "ssh" else \
        ["exec", running_workspace, "--", "sh", "-c", command]
    proc = subprocess.Popen([*DEVSY, *argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(devsy))
    try:
        line = read_line(proc.stdout)
        match = re.fullmatch(rb"ready (\d+) (\d+)\n", line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None else b"")
        tree = [observer.identify(int(match[1]), nonce), observer.identify(int(match[2]), nonce)]
        signalled = time.monotonic()
        proc.send_signal(signum)
        assert proc.wait(timeout=CANCEL_BOUND_S) == 128 + signum
        assert observer.wait_dead(tree, timeout=CANCEL_BOUND_S - (time.monotonic() - signalled)) == []
    finally:
        proc.kill()
    assert _identity(container) == before  # same instance, not restarted
    assert devsy.run("status", running_workspace, "--json").json["workspace"]["status"] == "running"
    after = devsy.run("ssh", running_workspace, "--command", f"cat /workspaces/{project}/kept.txt")
    assert (after.returncode, after.stdout) == (0, b"content")


@pytest.mark.parametrize("command", ["ssh", "exec"])
def test_cancel_while_the_guest_blocks_reading_caller_owned_stdin(devsy, running_workspace, docker_client,
                                                                    command):
    container = _container(docker_client, running_workspace)
    observer = ProcessObserver.via_docker(container.id)
    nonce = f"nonce-{secrets.token_hex(8)}"
    script = f': {nonce}; echo "ready $$"; cat > /dev/null'
    argv = ([*DEVSY, "ssh", running_workspace, "--command", script] if command == "ssh" else
            [*DEVSY, "exec", running_workspace, "--", "sh", "-c", script])
    stdin_read, stdin_write = os.pipe()  # ours: kept open and never written, so the guest's `cat` blocks
    try:
        proc = subprocess.Popen(argv, stdin=stdin_read, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=cli_env(devsy))
        try:
            line = read_line(proc.stdout)
            match = re.fullmatch(rb"ready (\d+)\n", line)
            assert match, line
            blocked = observer.identify(int(match[1]), nonce)
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=CANCEL_BOUND_S) == 128 + signal.SIGTERM
            assert observer.wait_dead([blocked], timeout=CANCEL_BOUND_S - (time.monotonic() - signalled)) == []
        finally:
            proc.kill()
        os.write(stdin_write, b"still ours\n")  # the caller's pipe is intact
    finally:
        os.close(stdin_read)
        os.close(stdin_write)
    assert devsy.run("ssh", running_workspace, "--command", "echo next").stdout == b"next\n"


@pytest.fixture
def logging_workspace(devsy, ws_id, guest_image, tmp_path) -> str:
    project = tmp_path / "logging-project"
    (project / ".devcontainer").mkdir(parents=True)
    (project / ".devcontainer" / "Dockerfile").write_text(
        f"FROM {guest_image}\n"
        "CMD [\"/bin/sh\", \"-c\", \"printf '\\\\nWORKLOAD-MARK-1\\\\n'; printf 'WORKLOAD-ERR\\\\n' >&2; "
        "trap 'printf \\\"\\\\nWORKLOAD-MARK-STOP\\\\n\\\"; exit 0' TERM; while sleep 1000 & wait $!; do :; done\"]\n")
    make_project(project, {"build": {"dockerfile": "Dockerfile"}, "overrideCommand": False})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    return ws_id


def test_logs_while_running_and_after_stop(devsy, logging_workspace):
    running = devsy.run("logs", logging_workspace)
    assert running.returncode == 0
    assert b"\nWORKLOAD-MARK-1\n" in running.stdout and b"WORKLOAD-ERR\n" in running.stdout
    assert devsy.run("stop", logging_workspace).returncode == 0
    stopped = devsy.run("logs", logging_workspace)
    assert stopped.returncode == 0
    assert b"\nWORKLOAD-MARK-1\n" in stopped.stdout and b"\nWORKLOAD-MARK-STOP\n" in stopped.stdout


def test_logs_are_redacted(devsy, logging_workspace):
    result = devsy.run("logs", logging_workspace, extra_env={"DEVSY_REDACT": "WORKLOAD-MARK-1"})
    assert b"\n***\n" in result.stdout and b"WORKLOAD-MARK-1" not in result.stdout
