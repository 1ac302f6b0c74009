"""The simulated MicroSandbox columns (`builtin-microsandbox-sim`, `external-microsandbox-sim`): the real msb driver
and devsy-provider-microsandbox against devsy-msb-sim (a stand-in backed by Docker). They are marked simulated
everywhere and never count for MicroSandbox: not in its verdict, not for `--devsy-require builtin-microsandbox`,
and the real column's probe refuses the stand-in. Cases the stand-in cannot show are reported as such."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.catalogue import Applies, Case, Manifest, ManifestError, Suite, result_id
from harness.parity import UNDECIDED, build_parity
from harness.parity_render import render_html, render_markdown
from harness.probes import probe_microsandbox
from harness.providers import (
    CATALOGUE_PROVIDER_IDS, SIMULATED_PROVIDER_IDS, SIMULATORS, parse_required, provider_table, select_providers,
)
from harness.records import CaseRecord
from harness.report import Report
from harness.validate import validate
from scenarios.manifest import MANIFEST

ROOT = Path(__file__).resolve().parents[1]
SIM = SIMULATORS["microsandbox"].executable
SIM_COLUMNS = ("builtin-microsandbox-sim", "external-microsandbox-sim")
RUN_TIMEOUT_S = 900


def _record(rid: str, outcome: str = "pass", reason: str = "") -> CaseRecord:
    case_id, _, provider = rid.rstrip("]").partition("[")
    return CaseRecord(nodeid=f"scenarios::{rid}", result_id=rid, case_id=case_id, provider=provider, outcome=outcome,
                      reason=reason, duration=1.0)


def _sim_report(*, limited_outcome: str = "skip") -> Report:
    """Every sim-column cell passes (the declared simulator limits skipped with their reason); the real MicroSandbox
    columns were not runnable here, as on these hosts."""
    results: dict[str, CaseRecord] = {}
    for case_id in MANIFEST.case_ids():
        for provider in SIM_COLUMNS:
            if not MANIFEST.applies(case_id, provider):
                continue
            limit = MANIFEST.simulator_limit(case_id, provider)
            rid = result_id(case_id, provider)
            results[rid] = _record(rid, limited_outcome, f"{provider} not runnable on the simulator: {limit}") \
                if limit else _record(rid)
        for provider in ("builtin-microsandbox", "external-microsandbox"):
            if MANIFEST.applies(case_id, provider):
                rid = result_id(case_id, provider)
                results[rid] = _record(rid, "skip", f"{provider} not runnable here: probe microsandbox: FAILED")
    return Report(run_id="r1", manifest="scenarios.manifest",
                  requested=["builtin-microsandbox", "external-microsandbox", *SIM_COLUMNS], required=[],
                  results=results)


def test_the_sim_columns_are_the_real_providers_pointed_at_the_stand_in(tmp_path: Path) -> None:
    table = provider_table()
    assert SIMULATED_PROVIDER_IDS == SIM_COLUMNS
    for name in SIM_COLUMNS:
        sim, real = table[name], table[name.removesuffix("-sim")]
        assert sim.simulated and not real.simulated and sim.backend == real.backend == "microsandbox"
        assert sim.up_args() == real.up_args(), "a sim column runs the same real provider"
        bound = sim.for_run(tmp_path)
        assert bound.environment() == {"MSB_PATH": str(SIM), "MSB_HOME": str(tmp_path / "msb-sim")}
        assert real.for_run(tmp_path).environment() == {}, "a real column gets no stand-in"
    assert SIM.is_file() and os.access(SIM, os.X_OK)


def test_the_sim_columns_are_selected_by_name_or_simulated_never_by_all() -> None:
    assert [p.name for p in select_providers("all")] == list(CATALOGUE_PROVIDER_IDS)
    assert not any(p.simulated for p in select_providers(None))
    assert [p.name for p in select_providers("simulated")] == list(SIM_COLUMNS)
    assert [p.name for p in select_providers("all,simulated")] == [*CATALOGUE_PROVIDER_IDS, *SIM_COLUMNS]
    assert [p.name for p in select_providers("external-microsandbox-sim,builtin-docker")] == \
        ["builtin-docker", "external-microsandbox-sim"]


def test_a_simulator_limit_needs_a_reason() -> None:
    with pytest.raises(ManifestError, match="simulator_reason"):
        Manifest(suites=(Suite("s", "S", (Case("c", "C", simulator=False),)),))
    limited = Manifest(suites=(Suite("s", "S", (Case("c", "C", Applies(), simulator=False,
                                                     simulator_reason="needs a VM"),)),))
    assert limited.simulator_limit("s/c", "builtin-microsandbox-sim") == "needs a VM"
    assert limited.simulator_limit("s/c", "builtin-microsandbox") is None, "a real column has no simulator limit"
    assert limited.applies("s/c", "external-microsandbox-sim"), "the cell exists (reported), it is not n.a."


def test_the_manifest_declares_what_the_stand_in_cannot_show() -> None:
    limited = {c for c in MANIFEST.case_ids() if MANIFEST.simulator_limit(c, "builtin-microsandbox-sim")}
    assert {"resources/effective", "resources/hotplug", "mounts/workspace-permissions"} <= limited
    assert "lifecycle/ownership" not in limited, "the stand-in shows uid=,gid= (fixtures/msb_sim/views.py)"


def test_a_simulated_column_never_satisfies_the_real_columns_requirement() -> None:
    report = _sim_report()
    problems = validate(report, MANIFEST, ["builtin-microsandbox"])
    assert problems and all("required provider builtin-microsandbox" in p for p in problems
                            if p.startswith("required")), problems
    assert any("lifecycle/up-fresh[builtin-microsandbox] is skip" in p for p in problems), problems
    verdict = {v.backend: v for v in build_parity(report, MANIFEST).verdicts}["microsandbox"]
    assert verdict.decision == UNDECIDED and "did not run" in verdict.reason, verdict
    assert "-sim" not in verdict.reason, "a verdict never reads a simulated column"


def test_a_failing_sim_column_does_not_decide_the_microsandbox_verdict() -> None:
    report = _sim_report()
    rid = result_id("lifecycle/up-fresh", "external-microsandbox-sim")
    report.results[rid] = _record(rid, "fail", "AssertionError: broken on the stand-in")
    verdict = {v.backend: v for v in build_parity(report, MANIFEST).verdicts}["microsandbox"]
    assert verdict.decision == UNDECIDED and "-sim" not in verdict.reason, verdict


def test_a_sim_column_may_be_required_on_its_own() -> None:
    assert parse_required("builtin-microsandbox-sim") == ["builtin-microsandbox-sim"]
    report = _sim_report()
    # Declared simulator limits are reported not runnable and do not fail a requirement of the sim column...
    assert validate(report, MANIFEST, list(SIM_COLUMNS)) == []
    # ...but each must still have its result, and every other case must pass.
    rid = result_id("resources/effective", "builtin-microsandbox-sim")
    del report.results[rid]
    assert f"manifest case {rid} has no result" in validate(report, MANIFEST, list(SIM_COLUMNS))
    other = result_id("lifecycle/up-fresh", "builtin-microsandbox-sim")
    report = _sim_report()
    report.results[other] = _record(other, "skip", "builtin-microsandbox-sim not runnable here: probe failed")
    assert any(other in p for p in validate(report, MANIFEST, ["builtin-microsandbox-sim"]))


def test_the_report_and_parity_table_mark_the_sim_columns() -> None:
    report = _sim_report()
    data = report.to_dict()
    assert data["simulated"]["columns"] == list(SIM_COLUMNS)
    assert data["simulated"]["counts_for_backend"] is False
    assert data["results"]["lifecycle/up-fresh[builtin-microsandbox-sim]"]["simulated"] is True
    assert data["results"]["lifecycle/up-fresh[builtin-microsandbox]"]["simulated"] is False
    table = build_parity(report, MANIFEST)
    markdown, page = render_markdown(table, report, MANIFEST), render_html(table, report, MANIFEST)
    header = next(line for line in markdown.splitlines() if line.startswith("| case |"))
    assert "builtin-microsandbox-sim (simulated)" in header and "| builtin-microsandbox |" in header
    assert "### Simulated columns" in markdown and "never evidence for microsandbox" in markdown
    assert "no --devsy-require of builtin-microsandbox, external-microsandbox" in markdown
    assert page.count("<span class='badge'>simulated</span>") == 2 and "<h2>Simulated columns</h2>" in page
    assert "not runnable on the simulator: a booted guest" in markdown


def test_the_real_microsandbox_probe_refuses_the_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MSB_PATH", str(SIM))
    result = probe_microsandbox("r-sim")
    assert not result.ok and not result.tooling_usable, result.evidence()
    assert "is the msb simulator, a stand-in" in result.summary
    assert not result.allows(needs_boot=False), "not even a no-boot case of a real column runs on the stand-in"


@pytest.fixture
def harness_env() -> Iterator[dict[str, str]]:
    """A private harness root and a private (short: msb socket paths) MSB_HOME for the real msb's probe."""
    root = Path(tempfile.mkdtemp(prefix="hsim-", dir="/tmp"))
    (root / "msb").mkdir()
    env = {**os.environ, "DEVSY_HARNESS_ROOT": str(root / "h"), "MSB_HOME": str(root / "msb")}
    env.pop("MSB_PATH", None)
    env.pop("MSB_LIBKRUNFW_PATH", None)
    yield env | {"_ROOT": str(root)}
    # The controller sweeps each run at its end; this catches what an interrupted one left, a run that wrote no
    # report too: by the run ids under this private root only (other harness runs on this host are not ours).
    runs = root / "h" / "runs"
    for run_id in sorted(p.name for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []:
        subprocess.run([sys.executable, "-m", "harness", "sweep", "--run-id", run_id], env=env, cwd=ROOT,
                       capture_output=True, timeout=300)
    shutil.rmtree(root, ignore_errors=True)


def _catalogue(env: dict[str, str], report: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """The real catalogue (scenarios/) in a pytest subprocess, bounded; its stdout and report.json."""
    env = {k: v for k, v in env.items() if k != "_ROOT"}
    done = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "-q",
                           "--devsy-report", str(report), *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    return done, json.loads((report / "report.json").read_text())


@pytest.mark.docker
def test_requiring_builtin_microsandbox_is_refused_though_its_sim_column_passes(harness_env: dict[str, str]) -> None:
    report_dir = Path(harness_env["_ROOT"]) / "report"
    done, report = _catalogue(harness_env, report_dir, "--devsy-case", "lifecycle/up-fresh,resources/effective",
                              "--devsy-providers", "builtin-microsandbox-sim",
                              "--devsy-require", "builtin-microsandbox")
    results = report["results"]
    assert results["lifecycle/up-fresh[builtin-microsandbox-sim]"]["outcome"] == "pass", done.stdout[-3000:]
    limited = results["resources/effective[builtin-microsandbox-sim]"]
    assert limited["outcome"] == "skip" and limited["simulated"] is True
    assert limited["reason"].startswith("builtin-microsandbox-sim not runnable on the simulator: a booted guest's")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "REQUIRED: required provider builtin-microsandbox: lifecycle/up-fresh[builtin-microsandbox]" in done.stdout
    assert results["lifecycle/up-fresh[builtin-microsandbox]"]["outcome"] != "pass"
    # The verdict reads the real columns only: here the required, not runnable built-in errored (a failing cell).
    verdict = next(line for line in (report_dir / "parity.md").read_text().splitlines()
                   if line.startswith("- **") and " microsandbox: " in line)
    assert "**YES**" not in verdict and "-sim" not in verdict, verdict
    assert report["probes"]["microsandbox-sim"]["ok"] and "SIMULATED" in report["probes"]["microsandbox-sim"]["summary"]
    # Pointing the real column at the stand-in does not help either: its probe refuses it.
    report_dir2 = Path(harness_env["_ROOT"]) / "report2"
    done, report = _catalogue({**harness_env, "MSB_PATH": str(SIM)}, report_dir2, "--devsy-case", "lifecycle/up-fresh",
                              "--devsy-providers", "builtin-microsandbox", "--devsy-require", "builtin-microsandbox")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "is the msb simulator, a stand-in" in report["results"]["lifecycle/up-fresh[builtin-microsandbox]"]["reason"]


def _sim(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SIM), *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.docker
def test_the_sweeper_removes_what_a_run_left_on_the_stand_in(tmp_path: Path, busybox_rootfs: Path) -> None:
    """A crashed run's stand-in sandbox (owned by label), volume (named after its workspace) and an unlabelled one
    (a probe's, say) are all gone after `sweep_run`; so are their Docker containers and volumes."""
    from fixtures.msb_sim.docker import LABEL_HOME
    from fixtures.msb_sim.state import home_key
    from harness.ownership import Ownership, RunPaths
    from harness.sweep import sweep_run

    run_id = "simsweep" + os.urandom(4).hex()
    root = tmp_path / "h"
    paths = RunPaths(run_id, root)
    workspace = Ownership(run_id).workspace_id("lifecycle/up-fresh", "builtin-microsandbox-sim")
    env = {**os.environ, **provider_table()["builtin-microsandbox-sim"].for_run(paths.run_dir).environment()}
    env.pop("MSB_LIBKRUNFW_PATH", None)
    key = home_key(Path(env["MSB_HOME"]))
    try:
        assert _sim(env, "volume", "create", f"{workspace}-data").returncode == 0
        made = _sim(env, "run", "--detach", "--name", f"devsy-{workspace}", "--label",
                    f"dev.devsy.workspace={workspace}", "--mount-named", f"{workspace}-data:/data", str(busybox_rootfs),
                    "--", "/bin/sh", "-c", "sleep 3600")
        assert made.returncode == 0, made.stderr
        assert _sim(env, "run", "--detach", "--name", "devsy-probe-left", str(busybox_rootfs), "--",
                    "/bin/sh", "-c", "sleep 3600").returncode == 0
        containers = ["docker", "ps", "-aq", "--filter", f"label={LABEL_HOME}={key}"]
        assert subprocess.run(containers, capture_output=True, text=True, timeout=60).stdout.split()

        report = sweep_run(run_id, root)

        assert not report.errors, report.render()
        assert f"microsandbox-sim sandbox devsy-{workspace}" in report.removed, report.render()
        assert f"microsandbox-sim volume {workspace}-data" in report.removed, report.render()
        assert subprocess.run(containers, capture_output=True, text=True, timeout=60).stdout.split() == []
        volumes = ["docker", "volume", "ls", "-q", "--filter", f"label={LABEL_HOME}={key}"]
        assert subprocess.run(volumes, capture_output=True, text=True, timeout=60).stdout.split() == []
        assert not paths.run_dir.exists()
    finally:
        from fixtures.msb_sim.docker import sweep

        sweep(key)


@pytest.mark.docker
def test_a_replaced_microsandbox_instance_has_a_new_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       busybox_rootfs: Path) -> None:
    """msb reuses the sandbox name for a workspace's replacement; devsy's instance id must still change (the Runtime
    Protocol's conformance: an authorized replacement is a new instance), and stop/start must keep it. Found by the
    lifecycle/recreate case on the -sim columns; the real msb names sandboxes the same way."""
    from devsy.driver.base import RunOptions
    from devsy.driver.microsandbox.driver import MicrosandboxDriver
    from fixtures.msb_sim.docker import sweep, untag_images
    from fixtures.msb_sim.state import home_key

    home = Path(tempfile.mkdtemp(prefix="msbid-", dir="/tmp"))
    monkeypatch.setenv("MSB_PATH", str(SIM))
    monkeypatch.setenv("MSB_HOME", str(home))
    monkeypatch.delenv("MSB_LIBKRUNFW_PATH", raising=False)
    keep_alive = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"]
    driver = MicrosandboxDriver()
    try:
        first = driver.run("idws", RunOptions(image=str(busybox_rootfs), cmd=keep_alive))
        driver.stop("idws")
        driver.start("idws")
        restarted = driver.find("idws")
        assert restarted is not None and restarted.id == first.id, "stop/start must keep the instance id"
        driver.delete("idws")
        second = driver.run("idws", RunOptions(image=str(busybox_rootfs), cmd=keep_alive))
        assert second.id != first.id, f"the replacement reports the old instance's id {first.id}"
        assert second.id.startswith("devsy-idws@")
    finally:
        driver.delete("idws")
        sweep(home_key(home))
        untag_images(home_key(home))
        shutil.rmtree(home, ignore_errors=True)
