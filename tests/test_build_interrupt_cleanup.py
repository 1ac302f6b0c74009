"""Ctrl-C during a first `up`'s image build leaves nothing labelled with the workspace: no layer, no build container.

With no record left, `devsy delete` cannot find what the rollback misses. The cancelled build's container still
holds the layer it ran on for a moment after the engine notices the client left; the rollback must not give up then.
Through the real CLI on the real Docker engine.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from devsy.stack_dump import STACK_DUMP_SIGNAL
from helpers.cli import DEVSY, HOST_NET, DevsyCli, cli_env
from helpers.engine import containers_of
from helpers.projects import make_project

pytestmark = pytest.mark.docker

_MARKER = "devsy-interrupt-step-started"
_SLOW_STEP = f"echo {_MARKER} && sleep 300"  # ends by itself, so a test that goes wrong is still bounded


def _dockerfile_project(root: Path, guest_image: str) -> Path:
    project = make_project(root, {"build": {"dockerfile": "Dockerfile"}})
    (project / ".devcontainer" / "Dockerfile").write_text(
        f"FROM {guest_image}\nENV STEP=one\nRUN echo layer > /layer\nRUN {_SLOW_STEP}\n")
    return project


def _feature_project(root: Path, guest_image: str) -> Path:
    project = make_project(root, {"image": guest_image, "features": {"./slow": {}}})
    folder = project / ".devcontainer" / "slow"
    folder.mkdir()
    (folder / "devcontainer-feature.json").write_text(json.dumps({"id": "slow", "version": "1.0.0"}))
    (folder / "install.sh").write_text(f"#!/bin/sh\nset -eu\n{_SLOW_STEP}\n")
    return project


PROJECTS = {"dockerfile-run": _dockerfile_project, "feature-install": _feature_project}


def _read_until(proc: subprocess.Popen, marker: str, timeout: float) -> None:
    """Read `proc`'s stderr until a line is `marker`; fails (quoting the output) at EOF or past `timeout`."""
    deadline, buffer = time.monotonic() + timeout, b""
    fd = proc.stderr.fileno()  # type: ignore[union-attr]
    while marker.encode() + b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {marker!r} within {timeout:.0f}s: {buffer[-2000:].decode(errors='replace')}"
        ready, _, _ = select.select([fd], [], [], remaining)
        chunk = os.read(fd, 65536) if ready else b""
        assert not ready or chunk, f"devsy up ended before {marker!r}: {buffer[-2000:].decode(errors='replace')}"
        buffer += chunk


def _stderr_after_exit(proc: subprocess.Popen, timeout: float) -> str:
    """`proc`'s remaining stderr once it has ended. Past `timeout` the test fails with every thread's stack in it
    (devsy/stack_dump.py), so a rare hang in CI says where it was."""
    try:
        return proc.communicate(timeout=timeout)[1].decode(errors="replace")
    except subprocess.TimeoutExpired:
        proc.send_signal(STACK_DUMP_SIGNAL)
        try:  # a second communicate returns all the output, the first one's too
            output = proc.communicate(timeout=10)[1]
        except subprocess.TimeoutExpired as still:
            output = still.stderr
        pytest.fail(f"devsy up still ran {timeout:.0f}s after Ctrl-C; its output, then its threads' stacks:\n"
                    f"{(output or b'').decode(errors='replace')}")


@pytest.mark.parametrize("kind", sorted(PROJECTS))
def test_ctrl_c_during_a_first_up_build_leaves_no_labelled_image_or_container(
        kind: str, devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path, docker_client) -> None:
    project = PROJECTS[kind](tmp_path / "p", guest_image)
    proc = subprocess.Popen([*DEVSY, "up", str(project), "--id", ws_id, *HOST_NET], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env(devsy))
    try:
        _read_until(proc, _MARKER, timeout=180)
        proc.send_signal(signal.SIGINT)
        stderr = _stderr_after_exit(proc, timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT, stderr
    assert "cleanup of this attempt failed" not in stderr, stderr
    assert not (devsy.home / "workspaces" / ws_id).exists(), "the interrupted first up left a record"
    images = docker_client.images.list(all=True, filters={"label": f"dev.devsy.workspace={ws_id}"})
    assert [image.id for image in images] == [], f"the interrupted build left labelled images; devsy said:\n{stderr}"
    assert [c.id for c in containers_of(docker_client, ws_id)] == [], "the interrupted build left a container"
