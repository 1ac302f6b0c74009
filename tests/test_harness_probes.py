"""Prerequisite probes: once per backend per run, with evidence; a failed probe skips (or, if required, fails)."""

from __future__ import annotations

import json

import pytest

from harness import probes, providers
from harness.probes import ProbeResult
from harness.providers import Provider

pytest_plugins = ["pytester"]

MANIFEST = """
from harness.catalogue import Case, Manifest, Suite
MANIFEST = Manifest(suites=(Suite("demo", "d", (Case("a", "a"), Case("b", "b"))),))
"""
SCENARIOS = """
from harness import case

@case("demo/a")
def test_a(provider, case):
    pass

@case("demo/b")
def test_b(provider, case):
    pass
"""
MSB = Provider("builtin", "microsandbox", ("--provider", "microsandbox"))


@pytest.fixture
def catalogue(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setattr(providers, "PROVIDERS", (*providers.PROVIDERS, MSB))
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(pytester.path / "root"))
    pytester.makepyfile(fake_manifest=MANIFEST, test_demo=SCENARIOS)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict]:
    result = pytester.runpytest("-p", "no:cacheprovider", "--devsy-manifest", str(pytester.path / "fake_manifest.py"),
                                "--devsy-report", str(pytester.path / "report"), *args)
    return result, json.loads((pytester.path / "report" / "report.json").read_text())


@pytest.mark.docker
def test_each_backend_is_probed_once_per_run(catalogue: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = probes.PROBES["docker"]

    def counting(run_id: str) -> ProbeResult:
        calls.append(run_id)
        return real(run_id)

    monkeypatch.setitem(probes.PROBES, "docker", counting)
    result, report = run(catalogue, "--devsy-providers", "builtin-docker")
    result.assert_outcomes(passed=2)
    assert len(calls) == 1
    docker_probe = report["probes"]["docker"]
    assert docker_probe["ok"] and [s["command"] for s in docker_probe["steps"]][-1].startswith("docker run --rm")
    assert all(set(step) == {"command", "exit_status", "output_tail", "duration"} for step in docker_probe["steps"])


def test_a_provider_whose_probe_fails_is_skipped_with_the_evidence(catalogue: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(probes.PROBES, "microsandbox")  # a backend without a probe (the real one: test_harness_msb_*)
    result, report = run(catalogue, "--devsy-providers", "builtin-microsandbox")
    result.assert_outcomes(skipped=2)
    record = report["results"]["demo/a[builtin-microsandbox]"]
    assert record["outcome"] == "skip"
    assert record["reason"].startswith("builtin-microsandbox not runnable here: probe microsandbox: FAILED")
    assert "no probe for backend 'microsandbox'" in record["reason"]
    assert report["probes"]["microsandbox"]["ok"] is False


@pytest.mark.docker
def test_a_required_provider_whose_probe_fails_fails_the_session(catalogue: pytest.Pytester) -> None:
    result, report = run(catalogue, "--devsy-providers", "builtin-docker", "--devsy-require", "builtin-microsandbox")
    assert result.ret == 1
    result.assert_outcomes(passed=2, errors=2)
    record = report["results"]["demo/b[builtin-microsandbox]"]
    assert record["outcome"] == "error"
    assert "required provider builtin-microsandbox not runnable here" in record["reason"]
    result.stdout.fnmatch_lines(["*REQUIRED: required provider builtin-microsandbox: demo/a*is error*"])


@pytest.mark.docker
def test_docker_probe_evidence_names_the_failing_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes, "guest_image", lambda: ("devsy-harness-absent:none", None))
    result = probes.probe_docker("probe-test")
    assert not result.ok
    assert result.steps[-1].command == "docker run --rm --network host devsy-harness-absent:none true"
    assert result.steps[-1].exit_status == 125
    assert "not present" in result.summary and "devsy-harness-absent" in result.evidence()
