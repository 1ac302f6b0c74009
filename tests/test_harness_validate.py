"""The report validator: each reason a report cannot gate a cutover is reported, and all of them at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.catalogue import Applies, Case, Manifest, Suite
from harness.records import CaseRecord
from harness.report import Report, write_report_json
from harness.validate import main, validate

MANIFEST = Manifest(
    suites=(
        Suite("lifecycle", "l", (Case("up-fresh", "t"), Case("delete", "t"))),
        Suite("only-builtin", "b", (Case("x", "t", Applies(kinds=("builtin",))),)),
    ),
    source="test",
)


def record(rid: str, outcome: str = "pass", reason: str = "") -> CaseRecord:
    case_id, provider = rid[:-1].split("[")
    return CaseRecord(rid, case_id, provider, f"node::{rid}", outcome, 1.0, reason)


def full_report(**changes: object) -> Report:
    ids = ["lifecycle/up-fresh[builtin-docker]", "lifecycle/delete[builtin-docker]", "only-builtin/x[builtin-docker]"]
    report = Report(run_id="r1", manifest="test", requested=["builtin-docker"], required=["builtin-docker"],
                    results={rid: record(rid) for rid in ids})
    for key, value in changes.items():
        setattr(report, key, value)
    return report


def test_complete_passing_report_has_no_problem() -> None:
    assert validate(full_report(), MANIFEST, ["builtin-docker"]) == []


def test_zero_cases_ran() -> None:
    report = full_report()
    report.results = {rid: record(rid, "skip", "probe failed") for rid in report.results}
    problems = validate(report, MANIFEST, [])
    assert any("zero cases ran" in p for p in problems), problems


def test_narrowed_run_cannot_gate() -> None:
    problems = validate(full_report(narrowed=True, narrowed_by=["-k lifecycle/up-fresh"]), MANIFEST, [])
    assert problems == ["the run was narrowed (-k lifecycle/up-fresh); rerun the whole catalogue to gate"]


def test_manifest_case_without_result() -> None:
    report = full_report()
    del report.results["lifecycle/delete[builtin-docker]"]
    assert validate(report, MANIFEST, []) == ["manifest case lifecycle/delete[builtin-docker] has no result"]


def test_result_not_in_manifest() -> None:
    report = full_report()
    report.results["lifecycle/ghost[builtin-docker]"] = record("lifecycle/ghost[builtin-docker]")
    report.results["only-builtin/x[external-docker]"] = record("only-builtin/x[external-docker]")
    problems = validate(report, MANIFEST, [])
    assert any("lifecycle/ghost[builtin-docker] is not in the manifest" in p for p in problems), problems
    assert any("only-builtin/x[external-docker] is not in the manifest" in p for p in problems), problems


@pytest.mark.parametrize("outcome", ["skip", "fail", "error"])
def test_required_provider_with_a_case_not_passing(outcome: str) -> None:
    report = full_report()
    rid = "lifecycle/up-fresh[builtin-docker]"
    report.results[rid] = record(rid, outcome, f"why it {outcome}ed\nmore evidence")
    problems = validate(report, MANIFEST, ["builtin-docker"])
    assert problems == [f"required provider builtin-docker: {rid} is {outcome}: why it {outcome}ed"]
    assert validate(report, MANIFEST, []) == [], "a provider that is not required may fail without gating"


def test_required_provider_that_did_not_run_at_all() -> None:
    problems = validate(full_report(), MANIFEST, ["builtin-docker", "external-docker"])
    assert "manifest case lifecycle/up-fresh[external-docker] has no result" in problems
    assert "manifest case lifecycle/delete[external-docker] has no result" in problems
    assert len(problems) == 2, problems  # only-builtin/x does not apply to external-docker


def test_every_problem_is_listed_and_the_cli_exits_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = full_report(narrowed=True, narrowed_by=["--lf"])
    del report.results["lifecycle/delete[builtin-docker]"]
    report.results["lifecycle/up-fresh[builtin-docker]"] = record("lifecycle/up-fresh[builtin-docker]", "fail", "boom")
    write_report_json(report, tmp_path)
    manifest_file = tmp_path / "manifest_for_test.py"
    manifest_file.write_text(
        "from harness.catalogue import Applies, Case, Manifest, Suite\n"
        "MANIFEST = Manifest(suites=(Suite('lifecycle', 'l', (Case('up-fresh', 't'), Case('delete', 't'))),"
        " Suite('only-builtin', 'b', (Case('x', 't', Applies(kinds=('builtin',))),))))\n"
    )
    code = main([str(tmp_path), "--require", "builtin-docker", "--manifest", str(manifest_file)])
    out = capsys.readouterr().out
    assert code == 1
    assert "3 problem(s)" in out
    assert "narrowed (--lf)" in out and "lifecycle/delete[builtin-docker] has no result" in out
    assert "lifecycle/up-fresh[builtin-docker] is fail: boom" in out


def test_cli_passes_a_good_report_and_refuses_a_missing_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nowhere")]) == 2
    assert "no report" in capsys.readouterr().out
    good = Report(run_id="r2", manifest="scenarios.manifest", requested=["builtin-docker"], required=[])
    from harness.catalogue import load_manifest

    for rid in load_manifest().expected_results(["builtin-docker"]):
        good.results[rid] = record(rid)
    write_report_json(good, tmp_path)
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["pass"] == len(good.results)
    assert main([str(tmp_path), "--require", "builtin-docker"]) == 0
    assert "OK" in capsys.readouterr().out


def test_a_report_of_another_manifest_cannot_gate() -> None:
    from harness.provenance import Provenance, manifest_digest

    report = full_report(provenance=Provenance(manifest_digest(MANIFEST), "c0ffee", "", "0.1.0", None))
    assert validate(report, MANIFEST, ["builtin-docker"]) == []
    report.provenance = Provenance("sha256:other", "c0ffee", "", "0.1.0", None)
    problems = validate(report, MANIFEST, ["builtin-docker"])
    assert len(problems) == 1 and "made with another manifest (sha256:other)" in problems[0], problems
