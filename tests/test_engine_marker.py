"""The `docker` marker: a test that needs the engine is marked by the fixtures it uses, and where no engine answers
it is reported "not runnable here" with the probe's evidence (never an error, never a silent pass)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")
NOWHERE = "unix:///nonexistent.sock"
INNER = """
def test_uses_the_engine(devsy):
    assert devsy.home.name == "home"

def test_needs_no_engine():
    pass
"""


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with this suite's conftest and one test that needs the engine (by its fixture) and one that not."""
    pytester.makeconftest(CONFTEST.read_text())
    shutil.copytree(CONFTEST.with_name("helpers"), pytester.path / "helpers")  # what the conftest imports
    pytester.makepyfile(test_inner=INNER)
    return pytester


def test_without_an_engine_a_docker_test_is_skipped_with_the_probes_evidence(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    monkeypatch.delenv("DEVSY_REQUIRE_ENGINE", raising=False)  # CI sets it for its own run
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", "-rs", "-m", "docker", timeout=240)
    result.assert_outcomes(skipped=1, deselected=1)
    skip_line = result.stdout.str()
    assert "SKIPPED [1] " in skip_line and "not runnable here: `docker info`" in skip_line, skip_line
    assert f"DOCKER_HOST={NOWHERE}" in skip_line and "exited 1" in skip_line, skip_line


def test_where_the_engine_is_required_its_absence_fails_the_docker_tests(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    monkeypatch.setenv("DEVSY_REQUIRE_ENGINE", "1")
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", "-m", "docker", timeout=240)
    result.assert_outcomes(errors=1, deselected=1)  # failed in setup: pytest counts it an error
    assert "DEVSY_REQUIRE_ENGINE=1 but the Docker engine does not answer" in result.stdout.str()


def test_the_fast_half_runs_without_an_engine(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", "-m", "not docker", timeout=240)
    result.assert_outcomes(passed=1, deselected=1)


@pytest.mark.docker
def test_with_an_engine_nothing_is_skipped(inner: pytest.Pytester) -> None:
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", "-rs", timeout=240)
    result.assert_outcomes(passed=2)
