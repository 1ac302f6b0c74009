"""The provider table: which providers the harness can drive, and how each is named on the devsy command line.

A provider id is `<kind>-<backend>` (CATALOGUE.md). New providers join by adding a row to PROVIDERS (and, for a new
backend, a probe in harness/probes.py and an inspector in harness/backends/).
"""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("builtin", "external")
BACKENDS = ("docker", "microsandbox")


class ProviderSelectionError(ValueError):
    """A --devsy-providers / --devsy-require value names no provider the harness can run."""


@dataclass(frozen=True)
class Provider:
    """One column of the parity table: a kind (builtin|external) on a backend (docker|microsandbox)."""

    kind: str
    backend: str
    cli_args: tuple[str, ...]
    # Provider options the harness passes on every `up` for this host (e.g. host networking for Docker here).
    default_options: tuple[tuple[str, str], ...] = field(default=())

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.backend}"

    def up_args(self) -> list[str]:
        """The `devsy up` arguments that select this provider and its default options."""
        args = list(self.cli_args)
        for key, value in self.default_options:
            args += ["--provider-option", f"{key}={value}"]
        return args

    def __str__(self) -> str:
        return self.name


# dockerd runs with --bridge=none here: containers only reach loopback fixtures with host networking.
_HOST_NETWORK = (("NETWORK_MODE", "host"),)

PROVIDERS: tuple[Provider, ...] = (
    Provider(kind="builtin", backend="docker", cli_args=("--provider", "docker"), default_options=_HOST_NETWORK),
    # devsy-provider-docker: the same driver behind Runtime Protocol v1, so the same options.
    Provider(kind="external", backend="docker", cli_args=("--provider", "external-docker"),
             default_options=_HOST_NETWORK),
    # msb's defaults serve: these providers have no host-specific option (a VM reaches loopback through msb).
    Provider(kind="builtin", backend="microsandbox", cli_args=("--provider", "microsandbox")),
    Provider(kind="external", backend="microsandbox", cli_args=("--provider", "external-microsandbox")),
    # devsy-provider-docker served on a remote machine (agent.local: false) by the devsy agent there; a case passes
    # its own PROVIDER_CONFIG (scenarios/support_remote.py). Its kind is in no suite's default applicability.
    Provider(kind="remote", backend="docker", cli_args=("--provider", "remote"), default_options=_HOST_NETWORK),
)

CATALOGUE_PROVIDER_IDS: tuple[str, ...] = tuple(sorted(
    [*(f"{kind}-{backend}" for kind in KINDS for backend in BACKENDS), "remote-docker"]))


def provider_table() -> dict[str, Provider]:
    """Every provider the harness can run, by id."""
    return {provider.name: provider for provider in PROVIDERS}


def select_providers(spec: str | None) -> list[Provider]:
    """Resolve a comma-separated provider list (or `all`/empty = the whole table) into a sorted provider list."""
    table = provider_table()
    if not spec or spec.strip() in ("all", "auto"):
        return sorted(table.values(), key=lambda p: p.name)
    chosen: dict[str, Provider] = {}
    for raw in spec.split(","):
        name = raw.strip()
        if not name:
            continue
        if name not in table:
            if name in CATALOGUE_PROVIDER_IDS:
                reason = f"{name} is a catalogue provider the harness cannot drive yet (no row in harness/providers.py)"
            else:
                reason = f"unknown provider {name!r}"
            raise ProviderSelectionError(f"{reason}; available: {', '.join(sorted(table))} (or 'all')")
        chosen[name] = table[name]
    return sorted(chosen.values(), key=lambda p: p.name)


def parse_required(spec: str | None) -> list[str]:
    """The sorted provider ids named by --devsy-require (ids need not be runnable: missing ones fail the run)."""
    if not spec:
        return []
    names = sorted({part.strip() for part in spec.split(",") if part.strip()})
    unknown = [name for name in names if name not in CATALOGUE_PROVIDER_IDS]
    if unknown:
        raise ProviderSelectionError(
            f"unknown required provider(s) {', '.join(unknown)}; catalogue ids: {', '.join(CATALOGUE_PROVIDER_IDS)}"
        )
    return names
