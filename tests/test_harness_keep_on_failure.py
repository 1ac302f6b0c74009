"""A deliberately failing case through the plugin (pytester, real devsy + Docker): --devsy-keep-on-failure keeps
its instance and prints the command that enters it; without the flag, cleanup removes the instance."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from harness.ownership import Ownership
from harness.probes import guest_image

pytest_plugins = ["pytester"]

RUN_ID = "keeptest"
MANIFEST = """
from harness.catalogue import Case, Manifest, Suite
MANIFEST = Manifest(suites=(Suite("demo", "d", (Case("fails", "fails on purpose"),)),))
"""
SCENARIO = """
import json
from harness import case

@case("demo/fails")
def test_fails(provider, case, devsy):
    source = case.workdir / "src"
    (source / ".devcontainer").mkdir(parents=True)
    (source / ".devcontainer" / "devcontainer.json").write_text(json.dumps({"image": %r, "remoteUser": "dev"}))
    devsy.up(source, case.workspace_id()).ws()
    assert False, "deliberate failure"
""" % guest_image()[0]


@pytest.fixture
def failing_case(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(pytester.path / "root"))
    pytester.makepyfile(fake_manifest=MANIFEST, test_demo=SCENARIO)
    return pytester


def run(pytester: pytest.Pytester, run_id: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--devsy-manifest", str(pytester.path / "fake_manifest.py"),
        "--devsy-report", str(pytester.path / "report"), "--devsy-run-id", run_id,
        "--devsy-providers", "builtin-docker", *extra, timeout=300,
    )


def instances(workspace_id: str) -> list[str]:
    client = docker.from_env()
    found = client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={workspace_id}"})
    return [container.status for container in found]


@pytest.mark.docker
def test_keep_on_failure_keeps_the_instance_and_prints_the_command(failing_case: pytest.Pytester) -> None:
    run_id = f"{RUN_ID}-kept"
    workspace_id = Ownership(run_id).workspace_id("demo/fails", "builtin-docker")
    try:
        result = run(failing_case, run_id, "--devsy-keep-on-failure")
        assert result.ret == 1
        result.assert_outcomes(failed=1)
        (line,) = [out for out in result.outlines if "instance kept; enter it with:" in out and "demo/fails" in out]
        command = line.split("enter it with: ", 1)[1]
        assert command.endswith(f" exec {workspace_id} -- /bin/sh") and "DEVSY_HOME=" in command
        assert instances(workspace_id) == ["running"], "the failed case's instance was not kept"
        entered = subprocess.run(command, shell=True, input=b"id -un\n", capture_output=True, timeout=60)
        assert entered.stdout.decode().strip() == "dev", entered
        record = json.loads((failing_case.path / "report" / "report.json").read_text())["results"]
        cleanup = record["demo/fails[builtin-docker]"]["cleanup"]
        assert cleanup and {step["status"] for step in cleanup} == {"kept"}
        assert "diagnostics saved under" in result.stdout.str()
    finally:
        sweep = subprocess.run([sys.executable, "-m", "harness", "sweep", "--run-id", run_id],
                               capture_output=True, text=True, timeout=120)
    assert sweep.returncode == 0, sweep.stdout
    assert instances(workspace_id) == [], "the sweeper left the kept instance"
    assert not (failing_case.path / "root" / "runs" / run_id).exists()


@pytest.mark.docker
def test_without_the_flag_cleanup_removes_the_failed_case_instance(failing_case: pytest.Pytester) -> None:
    run_id = f"{RUN_ID}-removed"
    workspace_id = Ownership(run_id).workspace_id("demo/fails", "builtin-docker")
    result = run(failing_case, run_id)
    result.assert_outcomes(failed=1)
    assert "instance kept" not in result.stdout.str()
    assert instances(workspace_id) == [], "cleanup left the failed case's instance"
    record = json.loads((failing_case.path / "report" / "report.json").read_text())["results"]
    steps = record["demo/fails[builtin-docker]"]["cleanup"]
    assert [s["name"].split(" ")[0:2] for s in steps] == [["devsy", "delete"], ["remove", "docker"]]
    assert all(s["status"] in ("done", "not-found") for s in steps), steps
    diagnostics = Path(record["demo/fails[builtin-docker]"]["diagnostics"])
    assert "deliberate failure" in (diagnostics / "failure.txt").read_text()
    assert "devsy up" in (diagnostics / "commands.txt").read_text()
    assert not (failing_case.path / "root" / "runs" / run_id).exists(), "the end-of-session sweep left the run dir"
