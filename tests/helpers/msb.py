"""MicroSandbox test helpers and fixtures (tests/conftest.py offers the fixtures to every test module).

Every test gets its own MSB_HOME, short enough for msb's Unix socket paths (they must stay under 108 bytes, which a
pytest tmp_path is not), removed afterwards with whatever the test left in it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from filelock import FileLock

from devsy.driver.microsandbox.locate import bundled_msb, locate_msb
from devsy.driver.microsandbox.msb import MsbClient
from devsy.driver.microsandbox.probe import ProbeResult

# A file that is not libkrunfw: msb creates the sandbox, then fails to build the VM (on every host, KVM or not).
NOT_A_LIBRARY = b"this file is not libkrunfw\n"
# The real msb, whatever MSB_PATH a test points elsewhere: assertions and cleanup always ask the real one.
REAL_MSB = str(bundled_msb())


def run_msb(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MSB_HOME": str(home)}
    env.pop("MSB_LIBKRUNFW_PATH", None)
    return subprocess.run([REAL_MSB, *args], env=env, capture_output=True, timeout=60)


def msb_json(home: Path, *args: str) -> list | dict:
    """Run the real msb against `home` and parse its JSON output (for assertions only)."""
    proc = run_msb(home, *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


def sandboxes(home: Path) -> list[str]:
    return [entry["name"] for entry in msb_json(home, "ls")]


def volumes(home: Path) -> list[str]:
    return [entry["name"] for entry in msb_json(home, "volume", "ls")]


def images(home: Path) -> list[str]:
    return [entry["reference"] for entry in msb_json(home, "image", "ls")]


@pytest.fixture
def msb_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = Path(tempfile.mkdtemp(prefix="msb-", dir="/tmp"))
    monkeypatch.setenv("MSB_HOME", str(home))
    yield home
    listed = run_msb(home, "ls", "--format", "json")
    if listed.returncode == 0:  # a test may have corrupted the state on purpose; then there is nothing to stop
        for entry in json.loads(listed.stdout):
            run_msb(home, "rm", "--force", entry["name"])
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def no_boot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """MSB_LIBKRUNFW_PATH at a file that is not the library: sandboxes get created but never boot."""
    fake = tmp_path / "libkrunfw-not.so"
    fake.write_bytes(NOT_A_LIBRARY)
    monkeypatch.setenv("MSB_LIBKRUNFW_PATH", str(fake))
    return fake


@pytest.fixture
def msb(msb_home: Path) -> MsbClient:
    return MsbClient(locate_msb())


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """MSB_PATH at a stand-in that records each invocation and fails: proves whether msb was called at all."""
    log = tmp_path / "msb-calls.log"
    script = tmp_path / "msb-recorder"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\necho "msb 0.7.11"\nexit 1\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("MSB_PATH", str(script))
    return log


@pytest.fixture(scope="session")
def busybox_rootfs() -> Path:
    """The probe's cached busybox rootfs: a real, tiny image directory msb accepts without Docker."""
    from devsy.driver.microsandbox.probe_rootfs import ensure_probe_rootfs

    return ensure_probe_rootfs()


@dataclass(frozen=True)
class SessionProbe:
    """The session's one real boot attempt and the sandboxes msb still listed in its private MSB_HOME afterwards."""

    result: ProbeResult
    left_behind: list[str]


_once: dict[str, Any] = {}  # this process's copies, so two fixtures asking for one value never compute it twice


def once_per_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str,
                 compute: Callable[[], Any]) -> Any:
    """`compute()` (a JSON value) once per test run, shared by the xdist workers (the pattern pytest-xdist documents).

    For the real boot probe: an attempt costs a full core for 12-20 s where KVM cannot run guests (the guest crawls
    under software KVM until it stops with KVM_EXIT_INTERNAL_ERROR); each worker and test repeating it made up most
    of the run.
    """
    if name in _once:
        return _once[name]
    if worker_id == "master":  # not under xdist: this process is the whole run
        _once[name] = compute()
        return _once[name]
    shared = tmp_path_factory.getbasetemp().parent / f"{name}.json"  # one directory per run, seen by every worker
    with FileLock(f"{shared}.lock", timeout=600):  # what holds it is bounded well within (a boot: 180 s + teardown)
        if not shared.exists():
            shared.write_text(json.dumps(compute()))
        _once[name] = json.loads(shared.read_text())
    return _once[name]


def _probe_in_private_home() -> dict:
    """The harness's MicroSandbox probe (msb answers, `msb ls`, then devsy's probe_boot: one real boot attempt) in a
    private MSB_HOME with msb's own libkrunfw, and the sandboxes msb still lists there afterwards."""
    from harness.probes import probe_microsandbox  # noqa: PLC0415 - only the probe needs the harness

    home = Path(tempfile.mkdtemp(prefix="msb-probe-", dir="/tmp"))
    env = {key: value for key, value in os.environ.items() if key != "MSB_LIBKRUNFW_PATH"}
    try:
        with mock.patch.dict(os.environ, {**env, "MSB_HOME": str(home)}, clear=True):
            result = probe_microsandbox("probe-test")
        return {"result": result.to_dict(), "left_behind": sandboxes(home)}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run_probe_once(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict:
    """The run's one real boot attempt, shared by the devsy probe tests and the harness probe tests.

    probe_microsandbox's boot step is probe_boot's result field for field (command, exit status, output tail,
    duration; booted = the probe's ok), so both levels are checked against one boot instead of paying for two."""
    return once_per_run(tmp_path_factory, worker_id, "msb-boot-probe", _probe_in_private_home)


def _run_probe_once(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> SessionProbe:
    data = run_probe_once(tmp_path_factory, worker_id)
    result = data["result"]
    # The boot step is the last; a probe that stopped before it (msb missing, `msb ls` failing) ends with its evidence.
    boot = result["steps"][-1]
    booted = ProbeResult(result["ok"], boot["command"], boot["exit_status"], boot["output_tail"], boot["duration"])
    return SessionProbe(booted, data["left_behind"])


@pytest.fixture(scope="session")
def session_probe(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> SessionProbe:
    """The session's real boot attempt, with what it left behind."""
    return _run_probe_once(tmp_path_factory, worker_id)


@pytest.fixture(scope="session")
def boot_probe(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> ProbeResult:
    """Can microVMs boot here? The session's real boot attempt (see _run_probe_once)."""
    return _run_probe_once(tmp_path_factory, worker_id).result


def skip_unless_boots(probe: ProbeResult) -> None:
    """Skip, with the probe's evidence, where microVMs cannot boot (these paths run on KVM runners)."""
    if not probe.ok:
        said = [line for line in probe.output_tail.splitlines() if "did not boot" in line] or [probe.output_tail]
        pytest.skip(f"needs a booted microVM; this host cannot boot one (`{probe.command}` -> exit "
                    f"{probe.exit_status} after {probe.duration:.1f} s: {said[-1]})")
