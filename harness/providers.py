"""The harness's provider columns: one per named row of devsy's provider table (devsy/driver/provider_table.py).

A column id is `<kind>-<backend>` (CATALOGUE.md). The harness adds only what is true of this host, by backend
(HOST_OPTIONS); the inspector of each backend is in harness/backends/. A provider joins by adding its row to devsy's
table (and, for a new backend, a probe in harness/probes.py and an inspector in harness/backends/).

A backend with a row in SIMULATORS also gets a *simulated* column per kind, `<kind>-<backend>-sim`: the same real
provider, with the environment pointing it at a stand-in for the backend's tooling (e.g. devsy-msb-sim for msb). A
simulated column is its own column: it never counts toward its backend's verdict, a cutover or a requirement of a
real column (its result ids are its own, and the real column's probe refuses a stand-in).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path

from devsy.driver.provider_table import provider_rows

# The kinds a case applies to unless its manifest entry says otherwise: `remote` cases opt in (scenarios/).
KINDS = ("builtin", "external")


class ProviderSelectionError(ValueError):
    """A --devsy-providers / --devsy-require value names no provider the harness can run."""


@dataclass(frozen=True)
class Provider:
    """One column of the parity table: a kind (builtin|external|remote) on a backend (docker|microsandbox), real or
    simulated (the real provider against a stand-in for the backend's tooling, SIMULATORS)."""

    kind: str
    backend: str
    cli_args: tuple[str, ...]
    # Provider options the harness passes on every `up` for this host (e.g. host networking for Docker here).
    default_options: tuple[tuple[str, str], ...] = field(default=())
    simulated: bool = False
    # Environment devsy (and an external provider it starts) and the harness's inspector run with; a simulated
    # column's points at the stand-in and the run's own state for it (bound by for_run).
    env: tuple[tuple[str, str], ...] = field(default=())

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.backend}{SIM_SUFFIX if self.simulated else ''}"

    @property
    def target(self) -> str:
        """What the probe and the inspector look at: the backend, or its stand-in (`microsandbox-sim`)."""
        return f"{self.backend}{SIM_SUFFIX}" if self.simulated else self.backend

    def environment(self) -> dict[str, str]:
        return dict(self.env)

    def for_run(self, run_dir: Path) -> "Provider":
        """This column with its run's environment (a simulated column's stand-in state lives in the run dir)."""
        if not self.simulated:
            return self
        return dataclasses.replace(self, env=SIMULATORS[self.backend].environment(run_dir))

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

SIM_SUFFIX = "-sim"


@dataclass(frozen=True)
class Simulator:
    """A stand-in for one backend's tooling: the variable that points devsy at it, the one naming its own state
    directory (one per run, under the run dir), and what the parity page says about it."""

    backend: str
    executable: Path
    path_env: str
    home_env: str
    home_dir: str
    describes: str

    def home(self, run_dir: Path) -> Path:
        return run_dir / self.home_dir

    def environment(self, run_dir: Path) -> tuple[tuple[str, str], ...]:
        return ((self.path_env, str(self.executable)), (self.home_env, str(self.home(run_dir))))


SIMULATORS: dict[str, Simulator] = {
    "microsandbox": Simulator(
        backend="microsandbox",
        executable=Path(sys.executable).with_name("devsy-msb-sim"),  # the console script of fixtures/msb_sim
        path_env="MSB_PATH",
        home_env="MSB_HOME",
        home_dir="msb-sim",
        describes="devsy's real MicroSandbox driver and devsy-provider-microsandbox with MSB_PATH at devsy-msb-sim "
                  "(fixtures/msb_sim), a stand-in for the msb CLI backed by Docker containers: no microVM boots, "
                  "so a booted guest's /proc, virtiofs semantics and hotplug are not shown",
    ),
}


def devsy_columns() -> tuple[Provider, ...]:
    """A column for every devsy provider row with a fixed name (a pattern row such as external:EXECUTABLE names no
    one provider), with this host's options for its backend."""
    return tuple(Provider(kind=row.kind, backend=row.backend, cli_args=("--provider", row.name),
                          default_options=HOST_OPTIONS.get(row.backend, ()))
                 for row in provider_rows() if not row.pattern)


def simulated_columns() -> tuple[Provider, ...]:
    """A simulated column for each built-in/external column whose backend has a stand-in (SIMULATORS): the same
    real provider, pointed at the stand-in by for_run."""
    return tuple(dataclasses.replace(p, simulated=True) for p in devsy_columns()
                 if p.backend in SIMULATORS and p.kind in KINDS)


PROVIDERS: tuple[Provider, ...] = devsy_columns() + simulated_columns()

# The backends with a built-in/external pair to compare (parity verdicts), in table order. A verdict reads only the
# real `builtin-<backend>` / `external-<backend>` columns, never a simulated one.
BACKENDS: tuple[str, ...] = tuple(dict.fromkeys(p.backend for p in PROVIDERS if p.kind in KINDS))

# The catalogue's real columns (what `all` selects and the parity table always shows), then the simulated ones
# (selected by name or `simulated`; shown apart, after the real ones, when a run has them).
CATALOGUE_PROVIDER_IDS: tuple[str, ...] = tuple(sorted(p.name for p in PROVIDERS if not p.simulated))
SIMULATED_PROVIDER_IDS: tuple[str, ...] = tuple(sorted(p.name for p in PROVIDERS if p.simulated))
ALL_SELECTOR, SIMULATED_SELECTOR = "all", "simulated"


def is_simulated(provider_id: str) -> bool:
    return provider_id in SIMULATED_PROVIDER_IDS


def split_provider_id(provider_id: str) -> tuple[str, str, bool]:
    """`builtin-microsandbox-sim` -> (`builtin`, `microsandbox`, True): kind, backend, simulated."""
    kind, _, rest = provider_id.partition("-")
    simulated = rest.endswith(SIM_SUFFIX) and rest[: -len(SIM_SUFFIX)] in SIMULATORS
    return kind, rest[: -len(SIM_SUFFIX)] if simulated else rest, simulated


def provider_table() -> dict[str, Provider]:
    """Every provider the harness can run, by id."""
    return {provider.name: provider for provider in PROVIDERS}


def column_order(provider: Provider) -> tuple[bool, str]:
    """Real columns by id, then the simulated ones by id."""
    return provider.simulated, provider.name


def select_providers(spec: str | None) -> list[Provider]:
    """Resolve a comma-separated provider list into providers in column order: ids, `all` (every real column; also
    an empty spec) and `simulated` (every simulated column)."""
    table = provider_table()
    chosen: dict[str, Provider] = {}
    parts = [part.strip() for part in (spec or "").split(",") if part.strip()] or [ALL_SELECTOR]
    for name in parts:
        if name in (ALL_SELECTOR, "auto"):
            chosen.update({n: table[n] for n in CATALOGUE_PROVIDER_IDS if n in table})
            continue
        if name == SIMULATED_SELECTOR:
            chosen.update({n: table[n] for n in SIMULATED_PROVIDER_IDS})
            continue
        if name not in table:
            if name in CATALOGUE_PROVIDER_IDS:
                reason = f"{name} is a catalogue provider the harness cannot drive yet (no row in harness/providers.py)"
            else:
                reason = f"unknown provider {name!r}"
            raise ProviderSelectionError(f"{reason}; available: {', '.join(sorted(table))} (or '{ALL_SELECTOR}', "
                                         f"'{SIMULATED_SELECTOR}')")
        chosen[name] = table[name]
    return sorted(chosen.values(), key=column_order)


def parse_required(spec: str | None) -> list[str]:
    """The sorted provider ids named by --devsy-require (ids need not be runnable: missing ones fail the run)."""
    if not spec:
        return []
    names = sorted({part.strip() for part in spec.split(",") if part.strip()})
    known = CATALOGUE_PROVIDER_IDS + SIMULATED_PROVIDER_IDS  # a simulated column may be required on its own
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ProviderSelectionError(
            f"unknown required provider(s) {', '.join(unknown)}; catalogue ids: {', '.join(known)}"
        )
    return names
