"""The body deadline is cooperative: a devsy command past it is killed, and cleanup still runs afterwards under
its own budget (never under the expired deadline)."""

from __future__ import annotations

import json
import time

import docker
import pytest

from harness.ownership import Ownership
from harness.probes import guest_image

pytest_plugins = ["pytester"]

MANIFEST = """
from harness.catalogue import Case, Manifest, Suite
MANIFEST = Manifest(suites=(Suite("demo", "d", (Case("slow", "outlives its deadline"),)),))
"""
SCENARIO = """
import json
from harness import case

@case("demo/slow")
def test_slow(provider, case, devsy):
    source = case.workdir / "src"
    (source / ".devcontainer").mkdir(parents=True)
    (source / ".devcontainer" / "devcontainer.json").write_text(json.dumps({"image": %r}))
    wid = case.workspace_id()
    devsy.up(source, wid).ws()
    devsy.exec(wid, ["sleep", "120"])
""" % guest_image()[0]


@pytest.mark.docker
def test_a_body_past_its_deadline_is_cut_and_cleanup_still_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(pytester.path / "root"))
    pytester.makepyfile(fake_manifest=MANIFEST, test_slow=SCENARIO)
    run_id = "deadline-test"
    workspace_id = Ownership(run_id).workspace_id("demo/slow", "builtin-docker")
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--devsy-manifest", str(pytester.path / "fake_manifest.py"),
        "--devsy-report", str(pytester.path / "report"), "--devsy-run-id", run_id,
        "--devsy-providers", "builtin-docker",
        "--devsy-case-timeout", "8", "--devsy-cleanup-budget", "30", timeout=300,
    )
    elapsed = time.monotonic() - started
    result.assert_outcomes(failed=1)
    assert elapsed < 60, f"the run took {elapsed:.0f}s: the 8s body deadline was not enforced"
    record = json.loads((pytester.path / "report" / "report.json").read_text())["results"]["demo/slow[builtin-docker]"]
    assert "CommandTimeout" in record["reason"] and "process group killed" in record["reason"]
    assert [step["status"] for step in record["cleanup"]] == ["done", "done"], record["cleanup"]
    found = docker.from_env().containers.list(all=True, filters={"label": f"dev.devsy.workspace={workspace_id}"})
    assert found == [], "cleanup did not remove the instance after the deadline expired"
