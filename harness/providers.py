"""The harness's provider columns: one per named row of devsy's provider table (devsy/driver/provider_table.py).

A column id is `<kind>-<backend>` (CATALOGUE.md). The harness adds only what is true of this host, by backend
(HOST_OPTIONS); the inspector of each backend is in harness/backends/. A provider joins by adding its row to devsy's
table (and, for a new backend, a probe in harness/probes.py and an inspector in harness/backends/).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devsy.driver.provider_table import provider_rows

# The kinds a case applies to unless its manifest entry says otherwise: `remote` cases opt in (scenarios/).
KINDS = ("builtin", "external")


class ProviderSelectionError(ValueError):
    """A --devsy-providers / --devsy-require value names no provider the harness can run."""


@dataclass(frozen=True)
class Provider:
    """One column of the parity table: a kind (builtin|external|remote) on a backend (docker|microsandbox)."""

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


# dockerd runs with --bridge=none here: containers only reach loopback fixtures with host networking. msb's defaults
# serve (a VM reaches loopback through msb). A remote-docker case passes its own PROVIDER_CONFIG
# (scenarios/support_remote.py); its runtime is Docker here, so it gets the same network option.
HOST_OPTIONS: dict[str, tuple[tuple[str, str], ...]] = {"docker": (("NETWORK_MODE", "host"),)}


def devsy_columns() -> tuple[Provider, ...]:
    """A column for every devsy provider row with a fixed name (a pattern row such as external:EXECUTABLE names no
    one provider), with this host's options for its backend."""
    return tuple(Provider(kind=row.kind, backend=row.backend, cli_args=("--provider", row.name),
                          default_options=HOST_OPTIONS.get(row.backend, ()))
                 for row in provider_rows() if not row.pattern)


PROVIDERS: tuple[Provider, ...] = devsy_columns()

# The backends with a built-in/external pair to compare (parity verdicts), in table order.
BACKENDS: tuple[str, ...] = tuple(dict.fromkeys(p.backend for p in PROVIDERS if p.kind in KINDS))

CATALOGUE_PROVIDER_IDS: tuple[str, ...] = tuple(sorted(p.name for p in PROVIDERS))


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
