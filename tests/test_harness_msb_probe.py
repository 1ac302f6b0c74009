"""The MicroSandbox probe (a real boot attempt through devsy's probe, bounded, with evidence) and how its result
gates cases: every case needs a booted guest unless the manifest says `needs_boot=False`, which then runs wherever
msb itself works."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import probes
from harness.probes import MSB_BOOT_TIMEOUT, ProbeResult, probe_microsandbox
from helpers.msb import run_probe_once

pytest_plugins = ["pytester"]


@pytest.fixture
def msb_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # Short (msb's socket paths must stay under 108 bytes) and private: the probe's sandbox never meets another's.
    home = Path(tempfile.mkdtemp(prefix="msb-hp-", dir="/tmp"))
    monkeypatch.setenv("MSB_HOME", str(home))
    monkeypatch.delenv("MSB_LIBKRUNFW_PATH", raising=False)
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def real_probe(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> tuple[ProbeResult, list[str]]:
    """One real probe_microsandbox per test run (a boot attempt costs a core for 12-20 s here; the devsy-level probe
    tests share this same boot), in a private MSB_HOME, with the sandboxes msb still lists there afterwards. The
    gating tests below replay this real result."""
    data = run_probe_once(tmp_path_factory, worker_id)
    return ProbeResult.from_dict(data["result"]), data["left_behind"]


def test_the_probe_boots_for_real_and_keeps_its_evidence(real_probe: tuple[ProbeResult, list[str]]) -> None:
    result, left = real_probe
    commands = [step.command for step in result.steps]
    assert commands[0].endswith("msb --version") and commands[1] == "msb ls --format json"
    assert commands[2].startswith("msb run --name devsy-probe-") and "echo devsy-probe-ok" in commands[2]
    boot = result.steps[2]
    assert 0 < boot.duration < MSB_BOOT_TIMEOUT + 30 and boot.output_tail.startswith("msb 0.7")
    assert result.usable is True and result.allows(needs_boot=False)
    if result.ok:
        assert boot.exit_status == 0 and result.allows(needs_boot=True)
    else:
        # These machines: KVM opens but cannot run guests. The evidence says what msb and the VM said.
        assert boot.exit_status is not None and boot.exit_status != 0
        assert "does not boot here" in result.summary and "did not boot" in boot.output_tail
        assert not result.allows(needs_boot=True)
        assert result.evidence().startswith("probe microsandbox: FAILED (tooling usable; no guest runs)")
    assert not [name for name in left if name.startswith("devsy-probe-")], "probe sandbox left"


def test_without_msb_nothing_is_runnable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MSB_PATH", str(tmp_path / "no-msb"))
    result = probe_microsandbox("probe-test")
    assert (result.ok, result.usable) == (False, False)
    assert not result.allows(needs_boot=False) and "MSB_PATH" in result.evidence()
    assert [step.exit_status for step in result.steps] == [None]


def test_results_round_trip_and_older_results_read_as_before() -> None:
    result = ProbeResult("microsandbox", False, "no boot", usable=True)
    assert ProbeResult.from_dict(result.to_dict()) == result
    old = ProbeResult.from_dict({"backend": "docker", "ok": True, "summary": "daemon answers", "steps": []})
    assert old.usable is None and old.tooling_usable and old.allows(needs_boot=True)


MANIFEST = """
from harness.catalogue import Case, Manifest, Suite
MANIFEST = Manifest(suites=(Suite("demo", "d", (Case("boots", "needs a VM"),
                                                Case("no-boot", "needs msb only", needs_boot=False))),))
"""
SCENARIOS = """
from harness import case

@case("demo/boots")
def test_boots(provider, case):
    assert case.probe is not None and case.probe.ok

@case("demo/no-boot")
def test_no_boot(provider, case, backend):
    assert case.probe is not None and case.probe.tooling_usable
    assert backend.instances(case.workspace_id()) == []
"""


@pytest.fixture
def catalogue(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, msb_home: Path,
              real_probe: tuple[ProbeResult, list[str]]) -> pytest.Pytester:
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(pytester.path / "root"))
    recorded = real_probe[0]  # the in-process run's probe_once asks PROBES: it gets this session's real result
    monkeypatch.setitem(probes.PROBES, "microsandbox", lambda run_id: recorded)
    pytester.makepyfile(fake_manifest=MANIFEST, test_demo=SCENARIOS)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict]:
    result = pytester.runpytest("-p", "no:cacheprovider", "--devsy-manifest", str(pytester.path / "fake_manifest.py"),
                                "--devsy-report", str(pytester.path / "report"), *args)
    return result, json.loads((pytester.path / "report" / "report.json").read_text())


def test_a_case_that_needs_no_boot_runs_where_msb_cannot_boot(catalogue: pytest.Pytester) -> None:
    result, report = _run(catalogue, "--devsy-providers", "builtin-microsandbox,external-microsandbox")
    probe = ProbeResult.from_dict(report["probes"]["microsandbox"])
    results = report["results"]
    assert results["demo/no-boot[builtin-microsandbox]"]["outcome"] == "pass"
    assert results["demo/no-boot[external-microsandbox]"]["outcome"] == "pass"
    if probe.ok:
        result.assert_outcomes(passed=4)
        return
    result.assert_outcomes(passed=2, skipped=2)
    reason = results["demo/boots[external-microsandbox]"]["reason"]
    assert reason.startswith("external-microsandbox not runnable here: probe microsandbox: FAILED (tooling usable")
    assert "msb run --name devsy-probe-" in reason, "the skip must carry the probe's evidence"


def test_a_required_provider_still_fails_the_cases_that_need_a_boot(catalogue: pytest.Pytester) -> None:
    result, report = _run(catalogue, "--devsy-providers", "builtin-microsandbox",
                          "--devsy-require", "builtin-microsandbox")
    if ProbeResult.from_dict(report["probes"]["microsandbox"]).ok:
        result.assert_outcomes(passed=2)
        return
    assert result.ret == 1
    result.assert_outcomes(passed=1, errors=1)
    assert report["results"]["demo/no-boot[builtin-microsandbox]"]["outcome"] == "pass"
    result.stdout.fnmatch_lines(["*REQUIRED: required provider builtin-microsandbox: demo/boots*is error*"])


def test_the_probe_is_registered_for_the_backend() -> None:
    assert probes.PROBES["microsandbox"] is probe_microsandbox
