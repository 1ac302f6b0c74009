"""The catalogue manifest model: suites, their cases, and which providers each case applies to.

The manifest (scenarios/manifest.py by default) is the single source of case ids and result ids for the matrix,
the report, the parity table and the validator.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.providers import BACKENDS, KINDS, split_provider_id

DEFAULT_MANIFEST = "scenarios.manifest"
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class ManifestError(ValueError):
    """The manifest is malformed or cannot be loaded."""


@dataclass(frozen=True)
class Applies:
    """Applicability of a case: the provider kinds and backends it runs on; `reason` says why the others are
    n.a. (a case that applies to a subset should give one, so the parity table never shows a bare n.a.)."""

    kinds: tuple[str, ...] = KINDS
    backends: tuple[str, ...] = BACKENDS
    reason: str = ""

    def to(self, provider_id: str) -> bool:
        """A simulated column (`<kind>-<backend>-sim`) has its backend's applicability; whether the stand-in can
        show the case is the case's own `simulator` field."""
        kind, backend, _ = split_provider_id(provider_id)
        return kind in self.kinds and backend in self.backends


@dataclass(frozen=True)
class Case:
    """One catalogue case. `needs_boot=False`: the case needs only the backend's tooling, not a running guest (a
    container that starts, a microVM that boots), so it runs wherever the backend's probe found the tooling usable,
    even when the probe could not boot a guest (e.g. a failure that happens at or before boot).

    `simulator=False`: a stand-in for the backend's tooling (a `-sim` column, harness/providers.py SIMULATORS)
    cannot show what the case checks; `simulator_reason` says what (required), and the case is reported "not
    runnable on the simulator: <reason>" on every simulated column, never silently left out."""

    name: str
    title: str
    applies: Applies = Applies()
    needs_boot: bool = True
    simulator: bool = True
    simulator_reason: str = ""

    def simulator_limit(self) -> str | None:
        """Why a simulated column cannot run this case; None when it can."""
        return None if self.simulator else self.simulator_reason


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    cases: tuple[Case, ...]


@dataclass(frozen=True)
class Manifest:
    """Suites in catalogue order; ids are `suite/case` and results `suite/case[provider]`."""

    suites: tuple[Suite, ...]
    source: str = DEFAULT_MANIFEST

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for suite in self.suites:
            for case in suite.cases:
                for part in (suite.name, case.name):
                    if not _ID.match(part):
                        raise ManifestError(f"manifest id part {part!r} must match {_ID.pattern}")
                case_id = f"{suite.name}/{case.name}"
                if not case.simulator and not case.simulator_reason.strip():
                    raise ManifestError(f"{case_id}: simulator=False needs a simulator_reason (what the stand-in "
                                        "cannot show), for the report's not-runnable cells")
                if case_id in seen:
                    raise ManifestError(f"manifest lists {case_id} twice")
                seen.add(case_id)

    def case_ids(self, suites: tuple[str, ...] | None = None) -> list[str]:
        """Every case id in catalogue order (only those of `suites` when given)."""
        return [f"{suite.name}/{case.name}" for suite in self.suites for case in suite.cases
                if suites is None or suite.name in suites]

    def suite_names(self) -> list[str]:
        return [suite.name for suite in self.suites]

    def select_suites(self, include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()) -> tuple[str, ...] | None:
        """The suites a shard runs: `include` (if any) minus `exclude`; None = no shard (every suite).

        Unknown names are an error: a shard list that names a suite the manifest lacks has drifted from it."""
        if not include and not exclude:
            return None
        known = self.suite_names()
        unknown = sorted({name for name in (*include, *exclude) if name not in known})
        if unknown:
            raise ManifestError(f"suite(s) {', '.join(unknown)} are not in {self.source}; suites: {', '.join(known)}")
        chosen = [name for name in known if (not include or name in include) and name not in exclude]
        return tuple(chosen)

    def case(self, case_id: str) -> Case | None:
        suite_name, _, case_name = case_id.partition("/")
        for suite in self.suites:
            if suite.name == suite_name:
                for case in suite.cases:
                    if case.name == case_name:
                        return case
        return None

    def applies(self, case_id: str, provider_id: str) -> bool:
        case = self.case(case_id)
        return case is not None and case.applies.to(provider_id)

    def simulator_limit(self, case_id: str, provider_id: str) -> str | None:
        """Why `provider_id` (a simulated column) cannot run `case_id` on its stand-in; None for a real column or a
        case the stand-in can show."""
        case = self.case(case_id)
        if case is None or not split_provider_id(provider_id)[2]:
            return None
        return case.simulator_limit()

    def not_applicable_reason(self, case_id: str, provider_id: str) -> str | None:
        """Why `case_id` does not apply to `provider_id` (the manifest's reason, else a generic one); None if it
        applies."""
        case = self.case(case_id)
        if case is not None and case.applies.to(provider_id):
            return None
        return (case.applies.reason if case is not None else "") or "the case does not apply to this provider"

    def expected_results(self, provider_ids: list[str], suites: tuple[str, ...] | None = None) -> list[str]:
        """Every result id the manifest expects for these providers (in `suites`, if given), in catalogue order."""
        return [
            result_id(case_id, provider)
            for case_id in self.case_ids(suites)
            for provider in sorted(provider_ids)
            if self.applies(case_id, provider)
        ]


def result_id(case_id: str, provider_id: str) -> str:
    return f"{case_id}[{provider_id}]"


def split_result_id(value: str) -> tuple[str, str]:
    """`suite/case[provider]` -> (`suite/case`, `provider`); raises ValueError when malformed."""
    match = re.fullmatch(r"([a-z0-9-]+/[a-z0-9-]+)\[([a-z0-9-]+)\]", value)
    if not match:
        raise ValueError(f"{value!r} is not a result id of the form suite/case[provider]")
    return match.group(1), match.group(2)


def load_manifest(source: str = DEFAULT_MANIFEST) -> Manifest:
    """Load `MANIFEST` from a module name (scenarios.manifest) or a path to a .py file."""
    try:
        if source.endswith(".py"):
            path = Path(source).resolve()
            spec = importlib.util.spec_from_file_location(f"_devsy_manifest_{abs(hash(path))}", path)
            if spec is None or spec.loader is None:
                raise ManifestError(f"cannot load manifest file {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(source)
    except (ImportError, OSError, SyntaxError) as exc:
        raise ManifestError(f"cannot load the catalogue manifest {source!r}: {exc}") from exc
    manifest = getattr(module, "MANIFEST", None)
    if not isinstance(manifest, Manifest):
        raise ManifestError(f"{source!r} defines no MANIFEST of type harness.catalogue.Manifest")
    return Manifest(suites=manifest.suites, source=source)
