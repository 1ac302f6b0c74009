"""The harness's own view of MicroSandbox (harness/backends/microsandbox.py) against the real msb, no VM needed.

Sandboxes are made the way devsy labels them, with MSB_LIBKRUNFW_PATH at a file that is not the library for the
`msb create` only: msb records the sandbox, cannot build the VM, and the sandbox stays (Stopped). That is a real
leftover of a run, which "nothing left" checks must see and the sweeper must remove, touching nothing it does not own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import sweep
from harness.backends import inspectable_backends, inspector_for
from harness.backends.microsandbox import MicrosandboxInspector
from harness.ownership import Ownership

NOT_A_LIBRARY = b"this file is not libkrunfw\n"


@pytest.fixture
def msb_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = Path(tempfile.mkdtemp(prefix="msb-hb-", dir="/tmp"))
    monkeypatch.setenv("MSB_HOME", str(home))
    monkeypatch.delenv("MSB_LIBKRUNFW_PATH", raising=False)
    yield home
    for name in _msb(home, "ls"):
        subprocess.run([_binary(), "rm", "--force", name["name"]], env={**os.environ, "MSB_HOME": str(home)},
                       capture_output=True, timeout=60)
    shutil.rmtree(home, ignore_errors=True)


def _binary() -> str:
    from devsy.driver.microsandbox.locate import locate_msb

    return locate_msb().path


def _msb(home: Path, *args: str) -> list[dict]:
    proc = subprocess.run([_binary(), *args, "--format", "json"], env={**os.environ, "MSB_HOME": str(home)},
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _names(home: Path, *args: str) -> list[str]:
    return sorted(entry["name"] for entry in _msb(home, *args))


def _sandbox(home: Path, tmp_path: Path, workspace: str, created_volumes: list[str] = ()) -> None:
    from devsy.driver.microsandbox.probe_rootfs import ensure_probe_rootfs

    fake = tmp_path / "libkrunfw-not.so"
    fake.write_bytes(NOT_A_LIBRARY)
    labels = {"dev.devsy.managed": "true", "dev.devsy.workspace": workspace}
    if created_volumes:
        labels["dev.devsy.created-volumes"] = ",".join(created_volumes)
    env = {**os.environ, "MSB_HOME": str(home), "MSB_LIBKRUNFW_PATH": str(fake)}
    for volume in created_volumes:
        subprocess.run([_binary(), "volume", "create", volume], env=env, capture_output=True, timeout=60, check=True)
    args = [arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")]
    proc = subprocess.run([_binary(), "create", "--name", f"devsy-{workspace}", *args, str(ensure_probe_rootfs())],
                          env=env, capture_output=True, timeout=120)
    assert proc.returncode != 0 and b"libkrunfw" in proc.stderr, proc.stderr  # created, never booted


def _volume(home: Path, name: str) -> None:
    subprocess.run([_binary(), "volume", "create", name], env={**os.environ, "MSB_HOME": str(home)},
                   capture_output=True, timeout=60, check=True)


def test_instances_and_volumes_of_a_workspace(msb_home: Path, tmp_path: Path) -> None:
    ws = Ownership("msb-inspect").workspace_id("lifecycle/delete", "builtin-microsandbox")
    _sandbox(msb_home, tmp_path, ws, created_volumes=["shared-by-label"])
    _volume(msb_home, f"{ws}-data")
    _volume(msb_home, "someone-elses")
    inspector = inspector_for("microsandbox")
    (instance,) = inspector.instances(ws)
    assert (instance.name, instance.status, instance.running) == (f"devsy-{ws}", "stopped", False)
    assert instance.labels["dev.devsy.workspace"] == ws and instance.created_at
    assert inspector.volumes(ws) == sorted(["shared-by-label", f"{ws}-data"])
    assert inspector.instances("hx00000000-absent") == [] and inspector.volumes("hx00000000-absent") == []
    assert f"msb logs devsy-{ws}" in inspector.instance_logs(ws)
    assert sorted(inspector.remove_workspace(ws)) == sorted([f"sandbox devsy-{ws}", "volume shared-by-label",
                                                              f"volume {ws}-data"])
    assert inspector.instances(ws) == [] and inspector.volumes(ws) == []
    assert _names(msb_home, "volume", "ls") == ["someone-elses"]


@pytest.mark.docker
def test_sweep_removes_only_what_the_run_owns(msb_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    mine, other = Ownership("msb-sweep-mine"), Ownership("msb-sweep-other")
    owned = mine.workspace_id("lifecycle/up-fresh", "external-microsandbox")
    kept = mine.workspace_id("lifecycle/up-fresh", "external-microsandbox", "kept")
    foreign = other.workspace_id("lifecycle/up-fresh", "external-microsandbox")
    for ws in (owned, kept, foreign, "user-project"):
        _sandbox(msb_home, tmp_path, ws, created_volumes=[f"{ws}-made"])
    orphan = mine.workspace_id("failure-cleanup/first-up-failure", "builtin-microsandbox") + "-data"
    for name in (orphan, f"{kept}-data", "user-volume"):
        _volume(msb_home, name)
    monkeypatch.setattr(sweep, "DEFAULT_SSH_CONFIG", tmp_path / "no-ssh-config")

    report = sweep.sweep_run("msb-sweep-mine", tmp_path / "root", keep_workspaces=frozenset({kept}))

    assert report.errors == []
    assert _names(msb_home, "ls") == sorted(f"devsy-{ws}" for ws in (kept, foreign, "user-project"))
    assert _names(msb_home, "volume", "ls") == sorted([f"{kept}-made", f"{kept}-data", f"{foreign}-made",
                                                       "user-project-made", "user-volume"])
    assert f"microsandbox sandbox devsy-{owned}" in report.removed and f"microsandbox volume {orphan}" in report.removed
    sweep.sweep_run("msb-sweep-mine", tmp_path / "root")
    assert _names(msb_home, "ls") == sorted(f"devsy-{ws}" for ws in (foreign, "user-project"))
    assert f"{kept}-data" not in _names(msb_home, "volume", "ls")


def test_the_sweeper_visits_microsandbox() -> None:
    assert "microsandbox" in inspectable_backends()
    assert isinstance(inspector_for("microsandbox"), MicrosandboxInspector)


def test_a_hung_msb_command_names_who_holds_a_creation_lock(tmp_path: Path) -> None:
    """The evidence a hung `msb inspect` reports (see creation_lock_holders): the holder's program, not its args."""
    import sys

    from harness.backends.microsandbox import creation_lock_holders

    locks = tmp_path / "run" / "creation-locks"
    locks.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys\n"
                               f"f = open({str(locks / 'a.lock')!r}, 'w'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                               "print('held', flush=True); sys.stdin.read()", "--env=SECRET=hunter2"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"held\n"
        report = creation_lock_holders()
        assert f"pid {holder.pid} (python" in report and f"{locks / 'a.lock'} open" in report, report
        assert "hunter2" not in report
    finally:
        holder.kill()
        holder.wait(60)
    assert f"pid {holder.pid}" not in creation_lock_holders()
