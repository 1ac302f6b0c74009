"""The provider columns the harness drives (one per row of devsy's provider table), how each is named on devsy's
command line, and the protocol-level handle scenarios use for requests devsy's CLI never sends (against the real
devsy-provider-docker)."""

from __future__ import annotations

import pytest

from harness.deadline import Deadline
from harness.provider_process import MountSpec, ProviderRefused, provider_process
from harness.providers import CATALOGUE_PROVIDER_IDS, SIMULATED_PROVIDER_IDS, provider_table, select_providers


def test_every_catalogue_provider_has_a_row() -> None:
    # The simulated columns (tests/test_harness_sim_columns.py) are rows too, selected by name, not by `all`.
    assert sorted(provider_table()) == sorted(CATALOGUE_PROVIDER_IDS + SIMULATED_PROVIDER_IDS)
    assert [p.name for p in select_providers("all")] == list(CATALOGUE_PROVIDER_IDS)


@pytest.mark.parametrize(("provider", "args"), [
    ("builtin-docker", ["--provider", "docker", "--provider-option", "NETWORK_MODE=host"]),
    ("external-docker", ["--provider", "external-docker", "--provider-option", "NETWORK_MODE=host"]),
    ("builtin-microsandbox", ["--provider", "microsandbox"]),
    ("external-microsandbox", ["--provider", "external-microsandbox"]),
    ("remote-docker", ["--provider", "remote", "--provider-option", "NETWORK_MODE=host"]),
])
def test_each_row_names_its_provider_for_devsy_up(provider: str, args: list[str]) -> None:
    row = provider_table()[provider]
    assert row.up_args() == args and row.name == provider


@pytest.mark.docker
def test_the_protocol_handle_speaks_to_the_provider_devsy_would_run() -> None:
    with provider_process(provider_table()["external-docker"], Deadline(120)) as process:
        assert process.recreate_mode(opt_in=True) == "on-run"
        assert process.recreate_mode(opt_in=False) == "delete"
        assert process.find("hx00000000-never-created") is None
        with pytest.raises(ProviderRefused) as refused:
            process.run_image("hx00000000-never-created", "devsy-guest:bookworm", allow_recreate=True,
                              mounts=(MountSpec("tmpfs", "relative"),))
        assert refused.value.code == "INVALID_ARGUMENT"
        assert process.find("hx00000000-never-created") is None, "a refused RunImage created something"


def test_the_protocol_handle_is_for_external_providers_only() -> None:
    with pytest.raises(ValueError, match="not an external provider"):
        with provider_process(provider_table()["builtin-docker"], Deadline(10)):
            pass
