"""The cutover verdict counts every case applicable to the external provider, external-only cases included: one
of them failing means "may NOT replace", naming the case (issue 13 item 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.catalogue import load_manifest
from harness.parity import NO, UNDECIDED, YES, build_parity, verdict_for
from harness.records import CaseRecord
from harness.report import Report

pytest_plugins = ["pytester"]

MANIFEST = """
from harness.catalogue import Applies, Case, Manifest, Suite
MANIFEST = Manifest(suites=(
    Suite("shared", "both kinds", (Case("a", "a"),)),
    Suite("ext", "external only", (Case("only-ext", "only external", Applies(kinds=("external",))),)),
))
"""
SCENARIOS = """
import os
from harness import case

@case("shared/a")
def test_a(provider, case):
    pass

@case("ext/only-ext")
def test_only_ext(provider, case):
    assert os.environ.get("EXT_ONLY_PASSES") == "1", "the external-only case failed on purpose"
"""
PROVIDERS = "builtin-docker,external-docker"


def _run(pytester: pytest.Pytester, name: str) -> tuple[pytest.RunResult, dict]:
    report = pytester.path / name
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs",
                                "--devsy-manifest", str(pytester.path / "fake_manifest.py"),
                                "--devsy-report", str(report), "--devsy-providers", PROVIDERS)
    return result, json.loads((report / "report.json").read_text())


def _outcomes(result: pytest.RunResult, **expected: int) -> None:
    """assert_outcomes, showing the inner run's output when it differs (a skip says why)."""
    counted = ("passed", "failed", "skipped", "errors")
    got = {key: value for key, value in result.parseoutcomes().items() if key in counted}
    assert got == expected, result.stdout.str()[-4000:]


@pytest.mark.docker
def test_an_external_only_case_failing_turns_the_verdict_to_may_not_replace(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(pytester.path / "root"))
    pytester.makepyfile(fake_manifest=MANIFEST, test_demo=SCENARIOS)

    monkeypatch.setenv("EXT_ONLY_PASSES", "0")
    result, data = _run(pytester, "failing")
    _outcomes(result, passed=2, failed=1)
    assert data["results"]["ext/only-ext[external-docker]"]["outcome"] == "fail"
    # (fnmatch would read the result id's brackets as a character class)
    assert "verdict docker: external-docker may NOT replace builtin-docker: 1 failing: ext/only-ext[external-docker]" \
        in result.stdout.str()
    table = (pytester.path / "failing" / "parity.md").read_text().splitlines()
    assert any("may NOT replace builtin-docker" in line and "only-ext" in line for line in table), table

    # The same catalogue with the external-only case passing: the one thing that changed decides the verdict.
    monkeypatch.setenv("EXT_ONLY_PASSES", "1")
    result, _ = _run(pytester, "passing")
    _outcomes(result, passed=3)
    assert "verdict docker: external-docker may replace builtin-docker: all 1 applicable cases pass on both; " \
        "the 1 external-only case passes on external-docker" in result.stdout.str()


def _real_run(failing: set[str], skipped: set[str] = frozenset()) -> Report:  # type: ignore[assignment]
    """A full run of the real manifest on both Docker providers: everything passes except `failing`/`skipped`."""
    manifest = load_manifest()
    report = Report(run_id="r", manifest="scenarios.manifest", requested=["builtin-docker", "external-docker"],
                    required=[])
    for rid in manifest.expected_results(["builtin-docker", "external-docker"]):
        case_id, provider = rid[:-1].split("[")
        outcome = "fail" if rid in failing else "skip" if rid in skipped else "pass"
        report.results[rid] = CaseRecord(rid, case_id, provider, f"n::{rid}", outcome, 1.0,
                                         "" if outcome == "pass" else "it broke")
    return report


def _docker_verdict(report: Report):  # noqa: ANN202 (a harness.parity.Verdict)
    return {v.backend: v for v in build_parity(report, load_manifest()).verdicts}["docker"]


def test_the_five_recreate_on_run_cases_failing_read_may_not_replace() -> None:
    manifest = load_manifest()
    recreate = {f"{c}[external-docker]" for c in manifest.case_ids(("recreate-on-run",))}
    assert len(recreate) >= 5 and all(not manifest.applies(r[:-1].split("[")[0], "builtin-docker") for r in recreate)
    verdict = _docker_verdict(_real_run(recreate))
    assert verdict.decision == NO, verdict.sentence()
    assert f"{len(recreate)} failing" in verdict.reason
    assert all(rid in verdict.reason for rid in recreate), verdict.reason
    assert _docker_verdict(_real_run(set())).decision == YES


def test_an_external_only_case_not_run_leaves_the_verdict_undecided() -> None:
    verdict = _docker_verdict(_real_run(set(), skipped={"recreate-on-run/running-target[external-docker]"}))
    assert verdict.decision == UNDECIDED, verdict.sentence()
    assert "external-docker: 1 cases" in verdict.reason


def test_failing_external_only_cases_decide_even_where_nothing_else_can() -> None:
    # The recreate-on-run CI shard: every case in it is external-only; all failing must read "may NOT replace".
    report = _real_run({f"recreate-on-run/{c}[external-docker]" for c in ("running-target", "stopped-target")})
    report.suites = ["recreate-on-run"]  # what a shard's report records
    verdict = verdict_for(report, load_manifest(), "docker")
    assert verdict.decision == NO and "recreate-on-run/running-target[external-docker]" in verdict.reason, verdict
    # A built-in that could not run here (all skips): the external failures still decide.
    report = _real_run({"recreate-on-run/stopped-target[external-docker]"},
                       skipped={rid for rid in report.results if rid.endswith("[builtin-docker]")})
    verdict = verdict_for(report, load_manifest(), "docker")
    assert verdict.decision == NO and "recreate-on-run/stopped-target[external-docker]" in verdict.reason, verdict
