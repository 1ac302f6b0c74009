"""Matrix expansion: cases x applicable providers, sorted and deterministic, selectable by result id."""

from __future__ import annotations

import pytest

from harness import providers
from harness.providers import Provider, ProviderSelectionError, select_providers

pytest_plugins = ["pytester"]

FAKE_PROVIDERS = (
    Provider("external", "docker", ("--provider", "docker-ext")),
    Provider("builtin", "microsandbox", ("--provider", "microsandbox")),
    Provider("builtin", "docker", ("--provider", "docker")),
)

MANIFEST = """
from harness.catalogue import Applies, Case, Manifest, Suite
MANIFEST = Manifest(suites=(Suite("alpha", "a", (
    Case("one", "every provider"),
    Case("two", "builtin only", Applies(kinds=("builtin",))),
    Case("three", "docker only", Applies(backends=("docker",))),
)),))
"""

SCENARIOS = """
from harness import case

@case("alpha/three")
def test_three(provider):
    pass

@case("alpha/one")
def test_one(provider):
    pass

@case("alpha/two")
def test_two(provider):
    pass
"""


@pytest.fixture
def catalogue(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setattr(providers, "PROVIDERS", FAKE_PROVIDERS)
    monkeypatch.setenv("DEVSY_HARNESS_ROOT", str(pytester.path / "harness-root"))
    pytester.makepyfile(fake_manifest=MANIFEST, test_alpha=SCENARIOS)
    return pytester


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider",
                                "--devsy-manifest", str(pytester.path / "fake_manifest.py"), *args)
    return [line for line in result.outlines if "::" in line]


def test_each_case_expands_over_its_applicable_providers_in_sorted_order(catalogue: pytest.Pytester) -> None:
    first = collected(catalogue)
    assert first == [
        "test_alpha.py::test_three[builtin-docker]",
        "test_alpha.py::test_three[external-docker]",
        "test_alpha.py::test_one[builtin-docker]",
        "test_alpha.py::test_one[builtin-microsandbox]",
        "test_alpha.py::test_one[external-docker]",
        "test_alpha.py::test_two[builtin-docker]",
        "test_alpha.py::test_two[builtin-microsandbox]",
    ]
    assert collected(catalogue) == first, "collection must be identical on every xdist worker"


def test_provider_selection_narrows_the_matrix(catalogue: pytest.Pytester) -> None:
    assert collected(catalogue, "--devsy-providers", "external-docker,builtin-docker") == [
        "test_alpha.py::test_three[builtin-docker]",
        "test_alpha.py::test_three[external-docker]",
        "test_alpha.py::test_one[builtin-docker]",
        "test_alpha.py::test_one[external-docker]",
        "test_alpha.py::test_two[builtin-docker]",
    ]


def test_result_ids_select_cases_with_k_and_devsy_case(catalogue: pytest.Pytester) -> None:
    assert collected(catalogue, "-k", "alpha/two") == [
        "test_alpha.py::test_two[builtin-docker]",
        "test_alpha.py::test_two[builtin-microsandbox]",
    ]
    assert collected(catalogue, "-k", "alpha/one[external-docker]") == ["test_alpha.py::test_one[external-docker]"]
    assert collected(catalogue, "--devsy-case", "alpha/three,alpha/one[builtin-microsandbox]") == [
        "test_alpha.py::test_three[builtin-docker]",
        "test_alpha.py::test_three[external-docker]",
        "test_alpha.py::test_one[builtin-microsandbox]",
    ]


def test_a_scenario_naming_a_case_missing_from_the_manifest_is_refused(catalogue: pytest.Pytester) -> None:
    catalogue.makepyfile(test_ghost="from harness import case\n@case('alpha/ghost')\ndef test_g(provider): pass\n")
    result = catalogue.runpytest("--collect-only", "-q", "-p", "no:cacheprovider",
                                 "--devsy-manifest", str(catalogue.path / "fake_manifest.py"), "test_ghost.py")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*case 'alpha/ghost' is not in *fake_manifest.py*"])


def test_select_providers_sorts_and_rejects_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(providers, "PROVIDERS", FAKE_PROVIDERS)
    assert [p.name for p in select_providers("all")] == ["builtin-docker", "builtin-microsandbox", "external-docker"]
    chosen = select_providers("external-docker, builtin-docker")
    assert [p.name for p in chosen] == ["builtin-docker", "external-docker"]
    with pytest.raises(ProviderSelectionError, match="unknown provider 'qemu'"):
        select_providers("qemu")
    monkeypatch.setattr(providers, "PROVIDERS", FAKE_PROVIDERS[2:])
    with pytest.raises(ProviderSelectionError, match="cannot drive yet"):
        select_providers("external-microsandbox")


def test_the_docker_row_passes_host_networking_by_default() -> None:
    (docker_row,) = [p for p in providers.PROVIDERS if p.name == "builtin-docker"]
    assert docker_row.up_args() == ["--provider", "docker", "--provider-option", "NETWORK_MODE=host"]


def test_pytest_timeout_is_a_backstop_above_body_deadline_plus_cleanup(catalogue: pytest.Pytester) -> None:
    items, _ = catalogue.inline_genitems("-p", "no:cacheprovider", "--devsy-manifest",
                                         str(catalogue.path / "fake_manifest.py"),
                                         "--devsy-case-timeout", "100", "--devsy-cleanup-budget", "10")
    assert items
    for item in items:
        (marker,) = item.iter_markers("timeout")
        assert marker.args[0] == 100 + 4 * 10 + 60
