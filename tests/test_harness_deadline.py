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
        "--devsy-case-timeout", "25", "--devsy-cleanup-budget", "30", timeout=300,
    )
    elapsed = time.monotonic() - started
    result.assert_outcomes(failed=1)
    assert elapsed < 100, f"the run took {elapsed:.0f}s: the 25s body deadline was not enforced (sleep 120)"
    record = json.loads((pytester.path / "report" / "report.json").read_text())["results"]["demo/slow[builtin-docker]"]
    assert "CommandTimeout" in record["reason"] and "process group killed" in record["reason"]
    # The deadline cuts `devsy exec` (the sleep); on a machine slow enough for it to cut `devsy up` instead, that
    # up unwinds on the SIGTERM and removes what it created itself, so cleanup's delete finds nothing to delete.
    cut_in_up = "devsy up" in record["reason"].split("\n")[0]
    expected = ["not-found" if cut_in_up else "done", "done"]
    assert [step["status"] for step in record["cleanup"]] == expected, record["cleanup"]
    found = docker.from_env().containers.list(all=True, filters={"label": f"dev.devsy.workspace={workspace_id}"})
    assert found == [], "cleanup did not remove the instance after the deadline expired"
