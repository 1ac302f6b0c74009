"""`python -m harness merge`: the CI shards' reports merge into the report one full run writes (same result ids,
outcomes and verdict), and reports that are not parts of one run are refused (exit 2), each reason naming them."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.catalogue import load_manifest
from harness.merge import main as merge_main
from harness.parity import build_parity
from harness.provenance import UNKNOWN, HostFacts, Provenance, manifest_digest
from harness.records import CaseRecord
from harness.report import Report, load_report, write_report_json
from harness.shards import plan
from harness.validate import main as validate_main
from harness.validate import validate

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = """
from harness.catalogue import Applies, Case, Manifest, Suite
MANIFEST = Manifest(suites=(
    Suite("one", "1", (Case("a", "a"), Case("b", "b"))),
    Suite("two", "2", (Case("c", "c"), Case("broken-on-external", "d"))),
    Suite("ext", "external only", (Case("e", "e", Applies(kinds=("external",))),)),
    Suite("other", "msb only", (Case("f", "f", Applies(backends=("microsandbox",))),)),
))
"""
SCENARIOS = """
from harness import case

@case("one/a")
def test_a(provider, case):
    pass

@case("one/b")
def test_b(provider, case):
    pass

@case("two/c")
def test_c(provider, case):
    pass

@case("two/broken-on-external")
def test_d(provider, case):
    assert provider.kind != "external", "broken on external providers, in every run"

@case("ext/e")
def test_e(provider, case):
    pass

@case("other/f")
def test_f(provider, case):
    pass
"""
PROVIDERS = "builtin-docker,external-docker"
NAMED = ["one", "ext"]  # as ci/kvm-shards.txt names suites: the rest (two, other) is the catch-all


def _run(pytester: pytest.Pytester, name: str, *select: str) -> Path:
    report = pytester.path / name
    pytester.runpytest("-p", "no:cacheprovider", "--devsy-manifest", str(pytester.path / "fake_manifest.py"),
                       "--devsy-report", str(report), "--devsy-providers", PROVIDERS, *select)
    assert (report / "report.json").is_file(), f"the {name} run wrote no report"
    return report


def _outcomes(report: Report) -> dict[str, str]:
    return {rid: record.outcome for rid, record in report.results.items()}


def _verdicts(report: Report) -> list[str]:
    manifest = load_manifest(report.manifest)
    return [verdict.sentence() for verdict in build_parity(report, manifest).verdicts]


@pytest.mark.docker
def test_merging_the_ci_shards_gives_what_one_full_run_gives(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(pytester.path / "root"))
    pytester.makepyfile(fake_manifest=MANIFEST, test_demo=SCENARIOS)
    manifest_path = str(pytester.path / "fake_manifest.py")
    full = load_report(_run(pytester, "full"))
    # Split as CI splits it: the shard matrix `python -m harness shards` prints, each shard its own run.
    shards = [_run(pytester, f"catalogue-{shard.shard}", *shard.select.split())
              for shard in plan(load_manifest(manifest_path), NAMED)]
    assert [load_report(s).suites for s in shards] == [["one"], ["ext"], ["two", "other"]]

    out = pytester.path / "merged"
    assert merge_main([str(out), *map(str, shards)]) == 0, capsys.readouterr().out
    said = capsys.readouterr().out
    merged = load_report(out)
    assert sorted(merged.results) == sorted(full.results) and len(full.results) == 9
    assert _outcomes(merged) == _outcomes(full)
    assert _outcomes(full)["two/broken-on-external[external-docker]"] == "fail"
    assert _verdicts(merged) == _verdicts(full)
    assert "may NOT replace builtin-docker: 1 failing: two/broken-on-external[external-docker]" in _verdicts(full)[0]
    assert _verdicts(full)[0] in said
    assert (merged.suites, merged.narrowed, sorted(merged.requested)) == (None, False, sorted(PROVIDERS.split(",")))
    assert [s.directory for s in merged.sources] == [str(s) for s in shards]
    assert all(s.host is not None and s.host.kernel == platform.release() for s in merged.sources)
    assert {"parity.md", "parity.html", "junit.xml", "report.json"} <= {p.name for p in out.iterdir()}
    junit = (out / "junit.xml").read_text()
    assert junit.count("<testcase ") == sum((s / "junit.xml").read_text().count("<testcase ") for s in shards) == 9

    # The validator judges the union as it judges the full run: the same problems (none without a requirement;
    # external-docker's failing case when it is required).
    manifest = load_manifest(manifest_path)
    for require in ([], ["builtin-docker"], ["external-docker"]):
        assert validate(merged, manifest, require) == validate(full, manifest, require), require
    assert validate_main([str(out), "--require", "builtin-docker"]) == 0
    assert validate_main([str(out), "--require", "external-docker"]) == 1
    assert "merged from 3 report(s)" in capsys.readouterr().out


@pytest.mark.docker
def test_a_report_records_what_it_was_made_from_and_the_host(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(pytester.path / "root"))
    pytester.makepyfile(fake_manifest=MANIFEST, test_demo=SCENARIOS)
    report = _run(pytester, "one", "--devsy-suite", "one")
    data = json.loads((report / "report.json").read_text())["provenance"]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
    assert (data["commit"], data["commit_note"]) == (head.stdout.strip(), "")
    assert data["manifest_digest"] == manifest_digest(load_manifest(str(pytester.path / "fake_manifest.py")))
    assert data["devsy_version"] == subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; print(m.version('devsy'))"],
        capture_output=True, text=True, timeout=30).stdout.strip()
    host = data["host"]
    engine = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True,
                            timeout=30).stdout.strip()
    assert (host["kernel"], host["docker_engine"]) == (platform.release(), engine)
    assert host["python"].endswith(platform.python_version())
    assert host["msb"] and host["dev_kvm"]
    assert host["kvm_probe"].startswith("not probed in this run"), "no MicroSandbox provider ran here"


# Refusals: built from reports (no run needed), one test per reason.

SMALL = """
from harness.catalogue import Case, Manifest, Suite
MANIFEST = Manifest(suites=(Suite("one", "1", (Case("a", "a"),)), Suite("two", "2", (Case("b", "b"),))))
"""


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small_manifest.py"
    path.write_text(SMALL)
    return path


def _shard(tmp_path: Path, manifest: Path, name: str, suites: list[str] | None, **prov: str) -> Path:
    digest = manifest_digest(load_manifest(str(manifest)))
    host = HostFacts("6.1.0", "CPython 3.11.7", "20.10.24", "0.7.11", "absent", "not probed")
    facts = {"manifest_digest": digest, "commit": "c0ffee", "commit_note": "", "devsy_version": "0.1.0", **prov}
    report = Report(run_id=f"run-{name}", manifest=str(manifest), requested=["builtin-docker"], required=[],
                    suites=suites, provenance=Provenance(host=host, **facts))
    cases = load_manifest(str(manifest)).case_ids(tuple(suites) if suites is not None else None)
    for case_id in cases:
        rid = f"{case_id}[builtin-docker]"
        report.results[rid] = CaseRecord(rid, case_id, "builtin-docker", f"n::{rid}", "pass", 1.0)
    directory = tmp_path / name
    write_report_json(report, directory)
    return directory


def _refused(capsys: pytest.CaptureFixture[str], out: Path, *reports: Path) -> str:
    assert merge_main([str(out), *map(str, reports)]) == 2
    assert not (out / "report.json").exists(), "a refused merge writes no report"
    return capsys.readouterr().out


def test_the_reports_merge_when_they_are_one_run(tmp_path: Path, small: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    one, two = _shard(tmp_path, small, "one", ["one"]), _shard(tmp_path, small, "two", ["two"])
    assert merge_main([str(tmp_path / "out"), str(one), str(two)]) == 0, capsys.readouterr().out
    assert sorted(load_report(tmp_path / "out").results) == ["one/a[builtin-docker]", "two/b[builtin-docker]"]
    assert validate_main([str(tmp_path / "out"), "--require", "builtin-docker"]) == 0


def test_refused_reports_of_different_manifests(tmp_path: Path, small: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    one = _shard(tmp_path, small, "one", ["one"])
    two = _shard(tmp_path, small, "two", ["two"], manifest_digest="sha256:another")
    said = _refused(capsys, tmp_path / "out", one, two)
    assert "different manifests (digests)" in said and str(one) in said and str(two) in said, said


def test_refused_reports_of_different_commits(tmp_path: Path, small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = _shard(tmp_path, small, "one", ["one"])
    two = _shard(tmp_path, small, "two", ["two"], commit="beef")
    said = _refused(capsys, tmp_path / "out", one, two)
    assert f"different commits: beef in {two}; c0ffee in {one}" in said, said


def test_refused_reports_of_different_devsy_versions(tmp_path: Path, small: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    one = _shard(tmp_path, small, "one", ["one"])
    two = _shard(tmp_path, small, "two", ["two"], devsy_version="0.2.0")
    said = _refused(capsys, tmp_path / "out", one, two)
    assert f"different devsy versions: 0.1.0 in {one}; 0.2.0 in {two}" in said, said


def test_refused_overlapping_reports(tmp_path: Path, small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, whole = _shard(tmp_path, small, "one", ["one"]), _shard(tmp_path, small, "whole", None)
    said = _refused(capsys, tmp_path / "out", one, whole)
    assert f"{one} and {whole} overlap: both cover one/a[builtin-docker]" in said, said


def test_refused_a_union_that_misses_a_suite(tmp_path: Path, small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = _shard(tmp_path, small, "one", ["one"])
    said = _refused(capsys, tmp_path / "out", one)
    assert f"the union of {one} misses manifest suite(s) two" in said, said


def test_refused_a_report_without_provenance(tmp_path: Path, small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = _shard(tmp_path, small, "one", ["one"]), _shard(tmp_path, small, "two", ["two"])
    data = json.loads((two / "report.json").read_text())
    data["provenance"] = None
    (two / "report.json").write_text(json.dumps(data))
    said = _refused(capsys, tmp_path / "out", one, two)
    assert f"{two}: no provenance recorded" in said, said


def test_an_unknown_commit_everywhere_merges_and_says_so(tmp_path: Path, small: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    note = "git is not installed on the host that made this report"
    one = _shard(tmp_path, small, "one", ["one"], commit=UNKNOWN, commit_note=note)
    two = _shard(tmp_path, small, "two", ["two"], commit=UNKNOWN, commit_note=note)
    assert merge_main([str(tmp_path / "out"), str(one), str(two)]) == 0
    assert f"commit unknown ({note})" in capsys.readouterr().out
    assert load_report(tmp_path / "out").provenance.commit == UNKNOWN  # type: ignore[union-attr]


def test_shards_in_folders_of_one_name_keep_every_probe(tmp_path: Path, small: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # Two runners' reports under folders that share a base name: both probes survive the merge.
    one, two = _shard(tmp_path / "a", small, "kvm", ["one"]), _shard(tmp_path / "b", small, "kvm", ["two"])
    for shard, ok in ((one, True), (two, False)):
        report = load_report(shard)
        report.probes["docker"] = {"ok": ok, "summary": f"runner {shard.parent.name}"}
        write_report_json(report, shard)
    assert merge_main([str(tmp_path / "out"), str(one), str(two)]) == 0, capsys.readouterr().out
    probes = load_report(tmp_path / "out").probes
    assert sorted(p["summary"] for p in probes.values()) == ["runner a", "runner b"], probes


def test_a_report_named_by_its_report_json_brings_its_junit(tmp_path: Path, small: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    one, two = _shard(tmp_path, small, "one", ["one"]), _shard(tmp_path, small, "two", ["two"])
    for shard in (one, two):
        (shard / "junit.xml").write_text(f"<testsuites><testsuite name='pytest'><testcase name='{shard.name}'/>"
                                         "</testsuite></testsuites>")
    assert merge_main([str(tmp_path / "out"), str(one / "report.json"), str(two / "report.json")]) == 0, \
        capsys.readouterr().out
    junit = (tmp_path / "out" / "junit.xml").read_text()
    assert "name=\"one\"" in junit and "name=\"two\"" in junit, junit


# Diagnostics: the merged report's evidence lives in OUT (CI uploads only OUT; the shard folders are gone).

FAILING_IN_TWO_SHARDS = SCENARIOS.replace(
    'def test_a(provider, case):\n    pass',
    'def test_a(provider, case):\n    assert provider.kind != "external", "one/a fails on external providers"')


def _diagnostics_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.docker
def test_the_merged_report_carries_every_shards_diagnostics(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(pytester.path / "root"))
    pytester.makepyfile(fake_manifest=MANIFEST, test_demo=FAILING_IN_TWO_SHARDS)
    ran = [_run(pytester, f"ran/catalogue-{shard.shard}", *shard.select.split())
           for shard in plan(load_manifest(str(pytester.path / "fake_manifest.py")), NAMED)]
    # As CI hands them over: each shard downloaded to another folder, all under one base name.
    shards = [(pytester.path / "downloaded" / str(n) / "shard") for n in range(len(ran))]
    for source, shard in zip(ran, shards, strict=True):
        shard.parent.mkdir(parents=True)
        source.rename(shard)
    expected: dict[str, dict[str, bytes]] = {}
    for shard in shards:
        for rid, record in load_report(shard).results.items():
            if record.diagnostics:
                expected[rid] = _diagnostics_bytes(shard / "diagnostics" / Path(record.diagnostics).name)
    assert sorted(expected) == ["one/a[external-docker]", "two/broken-on-external[external-docker]"], expected
    assert all(expected.values()), expected

    out = pytester.path / "merged"
    assert merge_main([str(out), *map(str, shards)]) == 0, capsys.readouterr().out
    for shard in shards:
        shutil.rmtree(shard)  # only OUT is uploaded
    merged = load_report(out)
    recorded = {rid: record for rid, record in merged.results.items() if record.diagnostics}
    assert sorted(recorded) == sorted(expected)
    for rid, record in recorded.items():
        folder = Path(str(record.diagnostics))
        assert folder.is_relative_to(out.resolve()) and folder.is_dir(), (rid, folder)
        assert _diagnostics_bytes(folder) == expected[rid], rid
        paths = [line.removeprefix("diagnostics: ") for line in record.evidence if line.startswith("diagnostics: ")]
        assert paths == [str(folder)], (rid, record.evidence)


def test_a_merge_that_cannot_copy_a_shards_diagnostics_leaves_out_as_it_was(
        tmp_path: Path, small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = _shard(tmp_path, small, "one", ["one"]), _shard(tmp_path, small, "two", ["two"])
    (one / "diagnostics" / "y").mkdir(parents=True)
    (one / "diagnostics" / "y" / "failure.txt").write_text("copied before the pipe is met\n")
    out = tmp_path / "out"
    assert merge_main([str(out), str(one), str(two)]) == 0, capsys.readouterr().out
    before = _diagnostics_bytes(out)
    assert any(name.endswith("failure.txt") for name in before), before
    (two / "diagnostics" / "x").mkdir(parents=True)
    os.mkfifo(two / "diagnostics" / "x" / "pipe")  # a named pipe cannot be copied: the copy fails half-way
    assert merge_main([str(out), str(one), str(two)]) == 2
    said = capsys.readouterr().out
    assert "pipe" in said and "unchanged" in said, said
    assert _diagnostics_bytes(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one", "out", "small_manifest.py", "two"], \
        "the merge left a staging folder behind"


def test_a_merge_into_a_file_or_an_unwritable_place_says_why_and_changes_nothing(
        tmp_path: Path, small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = _shard(tmp_path, small, "one", ["one"]), _shard(tmp_path, small, "two", ["two"])
    a_file = tmp_path / "out-file"
    a_file.write_text("mine\n")
    assert merge_main([str(a_file), str(one), str(two)]) == 2
    said = capsys.readouterr().out
    assert "is not a directory" in said and "Traceback" not in said, said
    assert a_file.read_text() == "mine\n"
    blocked = a_file / "nested" / "out"  # its parent cannot be made: a file is in the way
    assert merge_main([str(blocked), str(one), str(two)]) == 2
    said = capsys.readouterr().out
    assert "cannot write the merged report" in said and "unchanged" in said, said
