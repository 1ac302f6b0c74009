"""The sweeper removes only what harness runs own; a SIGKILLed run is fully swept, and a rerun sweeps first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import docker
import pytest

from devsy.ssh.mux.processes import masters_under
from harness import ssh_blocks, sweep
from harness.backends import SweepOutcome
from harness.ownership import HARNESS_RUN_LABEL, Ownership, RunPaths
from harness.probes import guest_image

pytest_plugins = ["pytester"]
IMAGE = guest_image()[0]


@pytest.fixture
def client() -> docker.DockerClient:
    return docker.from_env()


@pytest.fixture
def made(client: docker.DockerClient) -> Iterator[list[str]]:
    """Names of containers/volumes a test creates; removed at the end whatever the sweeper did."""
    names: list[str] = []
    yield names
    for name in names:
        for getter in (client.containers.get, client.volumes.get):
            try:
                getter(name).remove(force=True)
            except docker.errors.NotFound:
                pass


def make_objects(client: docker.DockerClient, made: list[str], name: str, labels: dict[str, str]) -> None:
    client.volumes.create(name=name, labels=labels)
    made.append(name)
    client.containers.create(IMAGE, ["true"], name=name, labels=labels, network_mode="host")


def exists(client: docker.DockerClient, name: str) -> tuple[bool, bool]:
    found = []
    for getter in (client.containers.get, client.volumes.get):
        try:
            getter(name)
            found.append(True)
        except docker.errors.NotFound:
            found.append(False)
    return found[0], found[1]


@pytest.mark.docker
def test_sweep_run_removes_only_that_runs_objects_and_directory(
    client: docker.DockerClient, made: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, other = f"sweep-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    owned_ws = Ownership(mine).workspace_id("lifecycle/up-fresh", "builtin-docker")
    kept_ws = Ownership(mine).workspace_id("lifecycle/up-fresh", "builtin-docker", "kept")
    other_ws = Ownership(other).workspace_id("lifecycle/up-fresh", "builtin-docker")
    user_ws = f"user-project-{uuid.uuid4().hex[:6]}"
    for ws in (owned_ws, kept_ws, other_ws, user_ws):
        make_objects(client, made, ws, {"dev.devsy.managed": "true", "dev.devsy.workspace": ws})
    probe_name = f"probe-{mine}"
    make_objects(client, made, probe_name, {HARNESS_RUN_LABEL: mine})
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text("".join(
        f"# >>> devsy workspace {ws} >>>\nHost {ws}.devsy\n# <<< devsy workspace {ws} <<<\n"
        for ws in (owned_ws, kept_ws, user_ws)
    ))
    monkeypatch.setattr(sweep, "DEFAULT_SSH_CONFIG", ssh_config)
    paths = RunPaths(mine, tmp_path / "root")
    paths.devsy_home.mkdir(parents=True)
    paths.lock_file.touch()

    report = sweep.sweep_run(mine, paths.root, keep_workspaces=frozenset({kept_ws}))

    assert report.errors == []
    assert exists(client, owned_ws) == (False, False) and exists(client, probe_name) == (False, False)
    assert exists(client, kept_ws) == (True, True), "a kept workspace was swept"
    assert exists(client, other_ws) == (True, True), "another run's workspace was swept"
    assert exists(client, user_ws) == (True, True), "a workspace no harness run owns was swept"
    assert ssh_blocks.block_ids(ssh_config) == [kept_ws, user_ws]
    assert paths.run_dir.exists(), "the run dir of a kept workspace must stay (its DEVSY_HOME)"

    sweep.sweep_run(mine, paths.root)
    assert exists(client, kept_ws) == (False, False)
    assert not paths.run_dir.exists() and not paths.lock_file.exists()
    assert exists(client, other_ws) == (True, True)


def test_sweep_all_owned_selects_every_run_but_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fake backend: sweeping every owned object of the real engine would also hit concurrent harness runs.
    seen: dict[str, bool] = {}
    objects = {
        "run-a": {"dev.devsy.workspace": Ownership("a").workspace_id("x/y", "builtin-docker")},
        "run-b": {"dev.devsy.workspace": Ownership("b").workspace_id("x/y", "builtin-docker")},
        "probe": {HARNESS_RUN_LABEL: "c"},
        "user": {"dev.devsy.workspace": "my-project"},
        "unlabelled": {},
    }

    class FakeInspector:
        backend = "docker"

        def sweep(self, owned, keep) -> SweepOutcome:  # type: ignore[no-untyped-def]
            seen.update({name: owned(labels) and not keep(labels) for name, labels in objects.items()})
            return SweepOutcome(removed=[n for n, chosen in seen.items() if chosen])

    monkeypatch.setattr(sweep, "inspector_for", lambda backend: FakeInspector())
    monkeypatch.setattr(sweep, "DEFAULT_SSH_CONFIG", tmp_path / "absent")
    for run_id in ("a", "b"):
        RunPaths(run_id, tmp_path).devsy_home.mkdir(parents=True)
    report = sweep.sweep_all_owned(tmp_path)
    assert seen == {"run-a": True, "run-b": True, "probe": True, "user": False, "unlabelled": False}
    assert report.run_ids == ["a", "b"] and not any((tmp_path / "runs").iterdir())


HANGING = """
import json, os, pathlib, time
from harness import case

@case("demo/hangs")
def test_hangs(provider, case, devsy):
    source = case.workdir / "src"
    (source / ".devcontainer").mkdir(parents=True)
    wid = case.workspace_id()
    config = {"image": %r, "mounts": [f"type=volume,source={wid}-data,target=/data"]}
    (source / ".devcontainer" / "devcontainer.json").write_text(json.dumps(config))
    devsy.up(source, wid).ws()
    assert devsy.run("ssh", wid, "--command", "true").exit_code == 0  # leaves the workspace's SSH master running
    pathlib.Path(os.environ["HARNESS_TEST_READY"]).write_text(wid)
    time.sleep(600)  # the body is killed with SIGKILL while here

@case("demo/start-swept")
def test_start_swept(provider, case, backend):
    leftover = case.ownership.workspace_id("demo/hangs", provider.name)
    assert backend.instances(leftover) == [] and backend.volumes(leftover) == []
    assert not (case.paths.run_dir / "cases" / "leftover-marker").exists()
""" % IMAGE
MANIFEST = """
from harness.catalogue import Case, Manifest, Suite
MANIFEST = Manifest(suites=(Suite("demo", "d", (Case("hangs", "h"), Case("start-swept", "s"))),))
"""


def start_run(pytester: pytest.Pytester, run_id: str, case_id: str, ready: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--devsy-manifest", "fake_manifest.py",
            "--devsy-run-id", run_id, "--devsy-case", case_id, "--devsy-providers", "builtin-docker", "test_sigkill.py"]
    env = {**os.environ, "HARNESS_TEST_READY": str(ready)}
    return subprocess.Popen(argv, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def kill_mid_case(pytester: pytest.Pytester, run_id: str, ready: Path) -> str:
    proc = start_run(pytester, run_id, "demo/hangs", ready)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        assert time.monotonic() < deadline, "the case never reached its body"
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return ready.read_text()


@pytest.mark.docker
def test_sigkilled_run_is_fully_swept_and_a_rerun_sweeps_first(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, client: docker.DockerClient
) -> None:
    root = pytester.path / "root"
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(root))
    pytester.makepyfile(fake_manifest=MANIFEST, test_sigkill=HANGING)
    run_id = f"sigkill-{uuid.uuid4().hex[:8]}"
    paths = RunPaths(run_id, root)

    workspace_id = kill_mid_case(pytester, run_id, pytester.path / "ready-1")
    by_label = {"label": f"dev.devsy.workspace={workspace_id}"}
    assert client.containers.list(all=True, filters=by_label), "nothing was left to sweep: the test proves nothing"
    assert client.volumes.list(filters=by_label) and paths.run_dir.exists()
    assert workspace_id in ssh_blocks.block_ids(paths.ssh_config)
    masters = [process for process, _ in masters_under(paths.run_dir)]
    assert len(masters) == 1, "the case's devsy ssh left no SSH master: the test proves nothing about it"

    swept = subprocess.run([sys.executable, "-m", "harness", "sweep", "--run-id", run_id],
                           capture_output=True, text=True, timeout=120)
    assert swept.returncode == 0, swept.stdout
    assert client.containers.list(all=True, filters=by_label) == []
    assert client.volumes.list(filters=by_label) == []
    assert not paths.run_dir.exists(), "the run directory (DEVSY_HOME, SSH config) survived the sweep"
    assert not masters[0].is_running() and masters_under(paths.run_dir) == []

    kill_mid_case(pytester, run_id, pytester.path / "ready-2")
    (paths.run_dir / "cases" / "leftover-marker").touch()
    rerun = start_run(pytester, run_id, "demo/start-swept", pytester.path / "unused")
    output = rerun.communicate(timeout=300)[0].decode()
    assert rerun.returncode == 0, output
    assert "1 passed" in output
    assert client.containers.list(all=True, filters=by_label) == []
    assert not paths.run_dir.exists(), "the rerun's end-of-session sweep left its directory"
