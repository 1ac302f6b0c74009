"""A devsy command killed at its timeout leaves its Python stacks in the record, for a hang seen once in CI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from devsy.process_tree import group_members
from harness.commands import ask_devsy_for_stacks, run_bounded

TIMEOUT_S = 4.0
READ_BOUND_S = 60.0


@pytest.mark.docker
def test_a_devsy_command_past_its_timeout_prints_its_stacks_before_it_is_killed(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / ".devcontainer").mkdir(parents=True)
    # A real devsy command blocked where it is told to wait: its initializeCommand, on the host, before any backend.
    (source / ".devcontainer" / "devcontainer.json").write_text(json.dumps(
        {"image": "devsy-guest:bookworm", "initializeCommand": "sleep 300"}))
    argv = [sys.executable, "-m", "devsy", "--home", str(tmp_path / "home"), "up", str(source), "--id", "hung",
            "--provider", "docker", "--provider-option", "NETWORK_MODE=host"]

    completed = run_bounded(argv, timeout=TIMEOUT_S)

    assert completed.timed_out and completed.exit_code is None
    stderr = completed.record().stderr_tail
    assert "(most recent call first)" in stderr, stderr
    assert "devsy/devcontainer/initialize_command.py" in stderr  # where it waited, not only that it did


def test_only_devsy_processes_of_the_group_are_asked(tmp_path: Path) -> None:
    """`sleep` in the same group would die of SIGUSR2 (its default action): it is left to the group's kill."""
    script = tmp_path / "devsy"  # named like the console script: `python .../bin/devsy`
    script.write_text("import faulthandler, signal, subprocess, sys\n"
                      "faulthandler.register(signal.SIGUSR2, all_threads=True)\n"
                      "child = subprocess.Popen(['sleep', '300'])\n"
                      "print(child.pid, flush=True)\n"
                      "sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    killer = threading.Timer(READ_BOUND_S, os.killpg, (proc.pid, signal.SIGKILL))  # bounds the reads below
    killer.start()
    try:
        sleeper = int(proc.stdout.readline())
        assert sorted(group_members(proc.pid)) == sorted([proc.pid, sleeper])
        assert ask_devsy_for_stacks(proc.pid) == [proc.pid]
        dump = [proc.stderr.readline() for _ in range(2)]  # the header, then the frame it waits in
        assert b"(most recent call first)" in dump[0] and str(script).encode() in dump[1], dump
    finally:
        killer.cancel()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=READ_BOUND_S)
