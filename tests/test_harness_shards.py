"""CI shards: the KVM workflow's matrix covers every manifest suite exactly once (its own shard or the catch-all),
a shard's report covers exactly its suites and validates on its own, and the workflow does what the brief says."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from harness.catalogue import Case, Manifest, ManifestError, Suite, load_manifest
from harness.parity import build_parity
from harness.report import load_report
from harness.shards import CATCH_ALL, plan, read_named

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "ci" / "github" / "kvm-catalogue.yml"
NAMED = ROOT / "ci" / "kvm-shards.txt"


def _covered(manifest: Manifest, named: list[str]) -> list[str]:
    """Every suite each shard runs, resolved as the shard's own run resolves its selection."""
    covered: list[str] = []
    for shard in plan(manifest, named):
        flag, _, value = shard.select.partition(" ")
        names = tuple(value.split(",")) if value else ()
        chosen = manifest.select_suites(include=names if flag == "--devsy-suite" else (),
                                        exclude=names if flag == "--devsy-suites-except" else ())
        covered += list(chosen if chosen is not None else manifest.suite_names())
    return covered


def test_the_checked_shard_list_covers_the_manifest_exactly_once() -> None:
    manifest = load_manifest()
    covered = _covered(manifest, read_named(NAMED))
    assert sorted(covered) == sorted(manifest.suite_names()), "a suite is run twice or by no shard"


def test_a_suite_missing_from_the_list_lands_in_the_catch_all() -> None:
    manifest = Manifest(suites=tuple(Suite(name, name, (Case("c", "c"),)) for name in ("a", "b", "new")))
    shards = plan(manifest, ["a", "b"])
    assert [s.shard for s in shards] == ["a", "b", CATCH_ALL]
    assert shards[-1].select == "--devsy-suites-except a,b" and shards[-1].suites == "new"
    assert sorted(_covered(manifest, ["a", "b"])) == ["a", "b", "new"]
    assert plan(manifest, [])[-1].select == ""  # nothing named: the catch-all is the whole catalogue


def test_a_stale_or_repeated_name_is_refused() -> None:
    manifest = Manifest(suites=(Suite("a", "a", (Case("c", "c"),)),))
    with pytest.raises(ManifestError, match="gone"):
        plan(manifest, ["a", "gone"])
    with pytest.raises(ManifestError, match="named twice"):
        plan(manifest, ["a", "a"])


def test_the_command_prints_a_github_matrix() -> None:
    proc = subprocess.run([sys.executable, "-m", "harness", "shards", "--named-file", str(NAMED)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    matrix = json.loads(proc.stdout)
    assert [entry["shard"] for entry in matrix["include"]] == [*read_named(NAMED), CATCH_ALL]
    assert all(set(entry) == {"shard", "select", "suites"} for entry in matrix["include"])
    bad = subprocess.run([sys.executable, "-m", "harness", "shards", "--named", "lifecycle,no-such-suite"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no-such-suite" in bad.stderr


def _steps(job: dict) -> str:
    return "\n".join(str(step.get("run", "")) + str(step.get("uses", "")) for step in job["steps"])


def test_the_workflow_runs_each_shard_gated_bounded_and_reported() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    plan_job, catalogue = workflow["jobs"]["plan"], workflow["jobs"]["catalogue"]
    assert "python -m harness shards --named-file ci/kvm-shards.txt" in _steps(plan_job)
    assert catalogue["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert all(isinstance(job.get("timeout-minutes"), int) for job in (plan_job, catalogue)), "per-job deadlines"
    assert workflow["env"]["REQUIRED"] == "builtin-microsandbox,external-microsandbox"
    steps = _steps(catalogue)
    assert '--devsy-require "$REQUIRED"' in steps and "--devsy-case-timeout" in steps
    assert "${{ matrix.select }}" in steps
    assert 'harness validate "$REPORT_DIR" --require "$REQUIRED"' in steps
    assert "devsy.driver.microsandbox.probe" in steps and "/dev/kvm" in steps
    assert "--require-hashes --no-deps -r ci/requirements-msb.txt" in steps
    upload = [s for s in catalogue["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert upload and upload[0]["if"] == "always()" and upload[0]["with"]["path"] == "${{ env.REPORT_DIR }}"
    assert upload[0]["with"]["name"] == "catalogue-${{ matrix.shard }}"
    assert upload[0]["with"]["overwrite"] is True  # a re-run shard replaces its report; the gate never sees a stale one
    copy = ROOT / ".github" / "workflows" / "kvm-catalogue.yml"
    if copy.exists():
        assert copy.read_text() == WORKFLOW.read_text(), f"{copy} differs from {WORKFLOW}"


def test_the_msb_requirement_pins_pyprojects_version_by_hash() -> None:
    pins = [d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
            if d.startswith("microsandbox")]
    text = (ROOT / "ci" / "requirements-msb.txt").read_text()
    assert pins == ["microsandbox==0.7.11"] and f"{pins[0]} \\" in text
    assert "--hash=sha256:65f1e4bbf8d721c9f7f557329fb6c8cf41f554c1c6942eac8b941198fa283fe0" in text


MANIFEST = """
from harness.catalogue import Applies, Case, Manifest, Suite
MANIFEST = Manifest(suites=(Suite("one", "1", (Case("a", "a"),)), Suite("two", "2", (Case("b", "b"),)),
                            Suite("other", "3", (Case("c", "c", Applies(backends=("microsandbox",))),))))
"""
SCENARIOS = """
from harness import case

@case("one/a")
def test_a(provider, case):
    pass

@case("two/b")
def test_b(provider, case):
    pass

@case("other/c")
def test_c(provider, case):
    pass
"""


@pytest.fixture
def catalogue(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(pytester.path / "root"))
    pytester.makepyfile(fake_manifest=MANIFEST, test_demo=SCENARIOS)
    return pytester


def _shard(pytester: pytest.Pytester, name: str, *select: str) -> tuple[pytest.RunResult, Path]:
    report = pytester.path / name
    result = pytester.runpytest("-p", "no:cacheprovider", "--devsy-manifest", str(pytester.path / "fake_manifest.py"),
                                "--devsy-report", str(report), "--devsy-providers", "builtin-docker",
                                "--devsy-require", "builtin-docker", *select)
    return result, report


def _validate(report: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", "validate", str(report), "--require", "builtin-docker"],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.docker
def test_each_shard_reports_and_validates_exactly_its_suites(catalogue: pytest.Pytester) -> None:
    result, report = _shard(catalogue, "one", "--devsy-suite", "one")
    result.assert_outcomes(passed=1)
    data = json.loads((report / "report.json").read_text())
    assert (data["suites"], data["narrowed"], sorted(data["results"])) == (["one"], False, ["one/a[builtin-docker]"])
    # Another shard's suites are "not run (other shard)" in the table (its data; parity_render decides the look).
    table = build_parity(load_report(report), load_manifest(str(catalogue.path / "fake_manifest.py")))
    cells = {(row.case_id, p): cell for row in table.rows for p, cell in zip(table.providers, row.cells, strict=True)}
    assert cells[("two/b", "builtin-docker")].text == "not run (other shard)"
    assert "shard of: one" in cells[("two/b", "builtin-docker")].detail and (report / "parity.md").is_file()
    validated = _validate(report)
    assert validated.returncode == 0 and "shard: one" in validated.stdout, validated.stdout

    result, report = _shard(catalogue, "rest", "--devsy-suites-except", "one")
    result.assert_outcomes(passed=1)
    assert json.loads((report / "report.json").read_text())["suites"] == ["two", "other"]
    assert _validate(report).returncode == 0


def test_an_empty_catch_all_succeeds_and_says_so(catalogue: pytest.Pytester) -> None:
    result, report = _shard(catalogue, "empty", "--devsy-suites-except", "one,two,other")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*shard: no suite left*"])
    validated = _validate(report)
    assert validated.returncode == 0 and "no suite" in validated.stdout, validated.stdout


def test_a_shard_with_nothing_for_these_providers_succeeds(catalogue: pytest.Pytester) -> None:
    result, report = _shard(catalogue, "other", "--devsy-suite", "other")  # applies to microsandbox only
    assert result.ret == 0
    assert json.loads((report / "report.json").read_text())["results"] == {}
    assert _validate(report).returncode == 0


def test_a_shard_naming_an_unknown_suite_is_a_usage_error(catalogue: pytest.Pytester) -> None:
    result, _ = _shard(catalogue, "bad", "--devsy-suite", "three")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*suite(s) three are not in*"])


def test_the_gate_job_merges_every_shard_validates_the_union_and_uploads_one_table() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    gate = workflow["jobs"]["gate"]
    assert set(gate["needs"]) == {"plan", "catalogue"} and gate["if"] == "always()"
    assert isinstance(gate.get("timeout-minutes"), int)
    uses = {str(step.get("uses", "")).split("@")[0]: step for step in gate["steps"]}
    download = uses["actions/download-artifact"]
    assert download["with"] == {"pattern": "catalogue-*", "path": "reports/shards"}
    runs = [str(step.get("run", "")) for step in gate["steps"]]
    merge = next(i for i, run in enumerate(runs) if 'python -m harness merge "$GATE_DIR" reports/shards/*' in run)
    validate = next(i for i, run in enumerate(runs)
                    if 'python -m harness validate "$GATE_DIR" --require "$REQUIRED"' in run)
    assert merge < validate
    upload = uses["actions/upload-artifact"]
    assert upload["if"] == "always()" and upload["with"]["path"] == "${{ env.GATE_DIR }}"
    assert gate["steps"].index(download) < merge < gate["steps"].index(upload)
