"""report.json and the parity table (Markdown + HTML) with the cutover verdict per backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import providers
from harness.catalogue import Applies, Case, Manifest, Suite
from harness.parity import NO, UNDECIDED, YES, build_parity
from harness.parity_render import render_html, render_markdown, write_parity
from harness.records import CaseRecord
from harness.provenance import HostFacts, Provenance
from harness.report import Report, ReportSource, load_report, write_report_json

MANIFEST = Manifest(
    suites=(
        Suite("lifecycle", "l", (Case("up-fresh", "up works"), Case("delete", "delete works"))),
        Suite("remote", "r", (Case("docker-only", "t", Applies(backends=("docker",))),)),
    ),
    source="test",
)


def record(rid: str, outcome: str = "pass", reason: str = "", **extra: object) -> CaseRecord:
    case_id, provider = rid[:-1].split("[")
    return CaseRecord(rid, case_id, provider, f"scenarios/x.py::{rid}", outcome, 2.5, reason, **extra)  # type: ignore[arg-type]


def report_with(*records: CaseRecord, requested: tuple[str, ...] = ("builtin-docker",)) -> Report:
    return Report(run_id="run-1", manifest="test", requested=list(requested), required=["builtin-docker"],
                  results={r.result_id: r for r in records},
                  probes={"docker": {"backend": "docker", "ok": True, "summary": "daemon answers", "steps": []}})


def test_report_json_round_trips_every_field(tmp_path: Path) -> None:
    original = report_with(
        record("lifecycle/up-fresh[builtin-docker]", figures={"up_seconds": 0.61}, workspaces=["hx1-a"]),
        record("lifecycle/delete[builtin-docker]", "fail", "assert gone", cleanup_errors=["delete: timed-out"],
               diagnostics="/r/diagnostics/x", evidence=["diagnostics: /r/diagnostics/x"]),
    )
    original.narrowed, original.narrowed_by = True, ["-k up"]
    host = HostFacts("6.1.0-13-amd64", "CPython 3.11.7", "20.10.24", "0.7.11 (/x/msb)", "absent", "see probes.x")
    original.provenance = Provenance("sha256:ab", "c0ffee", "", "0.1.0", host)
    original.sources = [ReportSource("reports/kvm-lifecycle", "run-0", ["lifecycle"], ["builtin-docker"], 0, 9.5, host)]
    write_report_json(original, tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["summary"] == {"pass": 1, "fail": 1, "skip": 0, "error": 0}
    assert data["providers"] == {"requested": ["builtin-docker"], "required": ["builtin-docker"]}
    assert data["results"]["lifecycle/up-fresh[builtin-docker]"]["figures"] == {"up_seconds": 0.61}
    loaded = load_report(tmp_path)
    assert loaded.to_dict() == original.to_dict()
    assert loaded.provenance == original.provenance and loaded.sources == original.sources
    assert data["format"] == 2 and data["provenance"]["host"]["kernel"] == "6.1.0-13-amd64"
    assert loaded.results["lifecycle/delete[builtin-docker]"].cleanup_errors == ["delete: timed-out"]


def test_cells_say_pass_fail_not_runnable_with_why_and_na(monkeypatch: pytest.MonkeyPatch) -> None:
    # A provider table with one row, so a catalogue provider without a row shows as such.
    monkeypatch.setattr(providers, "PROVIDERS", tuple(p for p in providers.PROVIDERS if p.name == "builtin-docker"))
    report = report_with(
        record("lifecycle/up-fresh[builtin-docker]"),
        record("lifecycle/delete[builtin-docker]", "fail", "AssertionError: instance left\nmore"),
        record("remote/docker-only[builtin-docker]", "skip", "builtin-docker not runnable here: probe docker: FAILED"),
    )
    table = build_parity(report, MANIFEST)
    cells = {
        (row.case_id, p): cell.text for row in table.rows for p, cell in zip(table.providers, row.cells, strict=True)
    }
    assert cells[("lifecycle/up-fresh", "builtin-docker")] == "pass"
    assert cells[("lifecycle/delete", "builtin-docker")] == "fail: AssertionError: instance left"
    assert cells[("remote/docker-only", "builtin-docker")].startswith("not runnable (builtin-docker not runnable")
    assert cells[("remote/docker-only", "builtin-microsandbox")] == "n.a."
    assert cells[("lifecycle/up-fresh", "external-docker")] == "not run (no harness provider)"
    assert table.providers == ("builtin-docker", "builtin-microsandbox", "external-docker", "external-microsandbox",
                               "remote-docker")


def test_verdict_cannot_be_decided_when_external_did_not_run() -> None:
    report = report_with(*(record(f"{c}[builtin-docker]") for c in MANIFEST.case_ids()))
    verdicts = {v.backend: v for v in build_parity(report, MANIFEST).verdicts}
    assert verdicts["docker"].decision == UNDECIDED
    assert "external-docker did not run" in verdicts["docker"].reason
    assert "builtin-docker: 3/3 pass" in verdicts["docker"].reason
    assert verdicts["microsandbox"].decision == UNDECIDED


def _both(external_outcome: str, narrowed: bool = False) -> Report:
    records = [record(f"{c}[builtin-docker]") for c in MANIFEST.case_ids()]
    records += [record(f"{c}[external-docker]") for c in MANIFEST.case_ids()]
    records[-1] = record(records[-1].result_id, external_outcome, "broken pipe")
    report = report_with(*records, requested=("builtin-docker", "external-docker"))
    report.narrowed, report.narrowed_by = narrowed, (["--lf"] if narrowed else [])
    return report


def test_verdict_yes_only_when_every_applicable_case_passes_on_both() -> None:
    verdict = build_parity(_both("pass"), MANIFEST).verdicts[0]
    assert (verdict.backend, verdict.decision) == ("docker", YES)
    expected = "docker: external-docker may replace builtin-docker: all 3 applicable cases pass on both"
    assert verdict.sentence() == expected


def test_verdict_no_when_a_case_fails_on_either_side() -> None:
    verdict = build_parity(_both("fail"), MANIFEST).verdicts[0]
    assert verdict.decision == NO and "remote/docker-only[external-docker]" in verdict.reason


def test_verdict_undecided_when_a_case_was_skipped_or_the_run_narrowed() -> None:
    assert build_parity(_both("skip"), MANIFEST).verdicts[0].decision == UNDECIDED
    narrowed = build_parity(_both("pass", narrowed=True), MANIFEST).verdicts[0]
    assert narrowed.decision == UNDECIDED and "narrowed" in narrowed.reason


def test_markdown_and_html_show_table_verdict_and_probe(tmp_path: Path) -> None:
    report = report_with(
        record("lifecycle/up-fresh[builtin-docker]"),
        record("lifecycle/delete[builtin-docker]", "fail", "x | <script>"),
    )
    table = build_parity(report, MANIFEST)
    markdown = render_markdown(table, report, MANIFEST)
    assert "| case | builtin-docker | builtin-microsandbox | external-docker | external-microsandbox |" in markdown
    assert "| **lifecycle**: l |" in markdown
    assert "| `up-fresh` | pass · 2.5 s |" in markdown
    assert "| `delete` | **fail** [1] · 2.5 s |" in markdown and "- **[1]** x \\| &lt;script&gt; (1 cell" in markdown
    # A failing case decides, even while the external provider has not run at all.
    assert "- **NO** docker: external-docker may NOT replace builtin-docker: 1 failing: lifecycle/delete\\[builtin-docker\\]" \
        in markdown
    assert "- docker: ok: daemon answers" in markdown
    assert "| `docker-only` | **missing** [" in markdown
    page = render_html(table, report, MANIFEST)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<td class='pass'" in page and "<td class='fail'" in page and "<td class='missing'" in page
    md_path, html_path = write_parity(table, report, tmp_path, MANIFEST)
    assert md_path.read_text() == markdown and html_path.read_text() == page


def test_a_case_that_does_not_apply_shows_the_manifests_reason() -> None:
    manifest = Manifest(suites=(Suite("s", "suite", (
        Case("docker-only", "d", Applies(backends=("docker",), reason="msb has no such thing")),
        Case("plain-external", "e", Applies(kinds=("external",))),
    )),))
    report = Report(run_id="r", manifest="m", requested=["builtin-microsandbox"], required=[])
    table = build_parity(report, manifest)
    cells = {row.case_id: dict(zip(table.providers, row.cells)) for row in table.rows}
    assert cells["s/docker-only"]["builtin-microsandbox"].detail == "msb has no such thing"
    assert cells["s/plain-external"]["builtin-docker"].detail == "the case does not apply to this provider"
    assert "msb has no such thing" in render_markdown(table, report, manifest)


def test_a_host_fact_that_fails_is_recorded_as_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import provenance

    def broken() -> str:
        raise OSError("cannot fork")

    monkeypatch.setattr(provenance, "docker_engine_version", broken)
    facts = provenance.host_facts({})
    assert facts.docker_engine == "unavailable: OSError: cannot fork" and facts.kernel
