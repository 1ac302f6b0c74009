"""`devsy-conformance` passes against the fake runtime (both profiles) and against devsy-provider-docker, run as a
user would: the installed console scripts, in subprocesses."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from devsy.runtime.host.testing import BIN_DIR, script

CONFORMANCE_TIMEOUT_S = 600


def _conformance(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([script("devsy-conformance"), *args], capture_output=True, text=True, env=env,
                          timeout=CONFORMANCE_TIMEOUT_S)


def _lines(proc: subprocess.CompletedProcess) -> dict[str, str]:
    """case name -> PASS/FAIL/SKIP/NOT-OFFERED"""
    return {line.split()[1]: line.split()[0] for line in proc.stdout.splitlines()
            if line.split()[:1] and line.split()[0] in ("PASS", "FAIL", "SKIP", "NOT-OFFERED")}


def test_fake_default_profile_passes(tmp_path: Path) -> None:
    proc = _conformance("devsy-fake-runtime", "serve", "--state-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outcomes = _lines(proc)
    assert outcomes["recreate-on-run"] == "SKIP"  # not offered by the default profile, and said so
    assert [name for name, status in outcomes.items() if status != "PASS"] == ["recreate-on-run"]
    assert proc.stdout.rstrip().endswith("20 passed, 0 failed, 1 skipped")
    assert not list(tmp_path.iterdir()), "conformance left workspaces behind"


def test_fake_recreation_profile_passes_every_case(tmp_path: Path) -> None:
    proc = _conformance("devsy-fake-runtime", "serve", "--state-dir", str(tmp_path), "--profile", "recreate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_lines(proc).values()) == {"PASS"}
    assert "recreate-on-run" in _lines(proc)


def test_fake_conformance_mode_passes_with_the_go_scenario_names(tmp_path: Path) -> None:
    """devsy's fake in `--mode conformance` speaks the Go fake's vocabulary: the gofake table is chosen by default,
    and devsy's own fake is still held to devsy policy (every case passes, none merely "not offered")."""
    proc = _conformance("devsy-fake-runtime", "serve", "--state-dir", str(tmp_path), "--mode", "conformance")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "commands: gofake; checks: protocol and devsy policy" in proc.stdout
    outcomes = _lines(proc)
    assert [name for name, status in outcomes.items() if status != "PASS"] == ["recreate-on-run"], proc.stdout
    assert outcomes["exec/signal-exit"] == "PASS" and "signal SIGTERM" in proc.stdout


def test_a_failing_provider_fails_the_run(tmp_path: Path) -> None:
    # One failing case is the whole point; the rest of the exec group adds a 3 s deadline and a 2 s stall.
    proc = _conformance("--only", "exec/binary-echo", "devsy-fake-runtime", "serve", "--state-dir", str(tmp_path),
                        "--mode", "nonzero-exit")
    assert proc.returncode == 1
    assert _lines(proc)["exec/binary-echo"] == "FAIL"


def test_an_unlaunchable_provider_fails_once(tmp_path: Path) -> None:
    proc = _conformance("devsy-fake-runtime", "serve", "--state-dir", str(tmp_path), "--mode", "crash-before-handshake")
    assert proc.returncode == 1
    assert proc.stdout.startswith("FAIL  launch: provider devsy-fake-runtime exited before completing the handshake")


@pytest.mark.usefixtures("guest_image")
def test_docker_provider_passes(docker_client) -> None:
    proc = _conformance("--env", "NETWORK_MODE=host", "devsy-provider-docker", "serve")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_lines(proc).values()) == {"PASS"}, proc.stdout
    # This run's label only: other tests may run conformance against the same engine at the same time.
    run_id = re.search(r"^run (\w+): ", proc.stdout, re.MULTILINE)[1]
    leftovers = docker_client.containers.list(all=True, filters={"label": f"dev.devsy.conformance-run={run_id}"})
    assert leftovers == [], "conformance left containers behind"
