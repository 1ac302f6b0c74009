"""The harness options as one typed value, resolved from the pytest config (controller and workers alike)."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.ownership import RunIdError, RunPaths, check_run_id, harness_root, new_run_id
from harness.providers import Provider, ProviderSelectionError, parse_required, provider_table, select_providers

DEFAULT_CASE_TIMEOUT = 300.0
DEFAULT_CLEANUP_BUDGET = 60.0
# pytest-timeout backstop = body deadline + this many cleanup budgets + a margin (a case rarely has more steps).
BACKSTOP_CLEANUP_STEPS = 4
BACKSTOP_MARGIN = 60.0


@dataclass(frozen=True)
class HarnessOptions:
    providers: tuple[Provider, ...]
    required: tuple[str, ...]
    report_dir: Path
    report_explicit: bool
    keep_on_failure: bool
    case_timeout: float
    cleanup_budget: float
    cli: tuple[str, ...]
    run_id: str
    root: Path
    case_filter: tuple[str, ...]
    manifest: str
    # A shard (--devsy-suite / --devsy-suites-except): resolved against the manifest by the session.
    suites_include: tuple[str, ...] = ()
    suites_exclude: tuple[str, ...] = ()

    @property
    def requested(self) -> list[str]:
        return [p.name for p in self.providers]

    @property
    def backstop(self) -> float:
        return self.case_timeout + self.cleanup_budget * BACKSTOP_CLEANUP_STEPS + BACKSTOP_MARGIN


def default_cli() -> str:
    """This project's installed `devsy` (next to the running interpreter), else the one on PATH."""
    beside = Path(sys.executable).parent / "devsy"
    if beside.exists():
        return str(beside)
    return shutil.which("devsy") or "devsy"


def resolve_run_id(config: pytest.Config) -> str:
    """--devsy-run-id, else the xdist test-run uid (worker input, option or env), else a new one."""
    workerinput = getattr(config, "workerinput", None)
    candidates = [
        config.getoption("devsy_run_id"),
        workerinput.get("devsy_run_id") if workerinput else None,
        workerinput.get("testrunuid") if workerinput else None,
        getattr(config.option, "testrunuid", None),
        os.environ.get("PYTEST_XDIST_TESTRUNUID"),
    ]
    for candidate in candidates:
        if candidate:
            return check_run_id(str(candidate))
    return new_run_id()


def _split(values: list[str] | None) -> tuple[str, ...]:
    return tuple(part.strip() for value in values or [] for part in value.split(",") if part.strip())


def parse_options(config: pytest.Config) -> HarnessOptions:
    """Resolve every --devsy-* option; raises pytest.UsageError with the reason when one is invalid."""
    try:
        run_id = resolve_run_id(config)
        required = parse_required(config.getoption("devsy_require"))
        providers = {p.name: p for p in select_providers(config.getoption("devsy_providers"))}
    except (RunIdError, ProviderSelectionError) as exc:
        raise pytest.UsageError(str(exc)) from None
    table = provider_table()
    # A required provider always runs when the harness can drive it; otherwise it will be reported missing.
    providers.update({name: table[name] for name in required if name in table})
    explicit = config.getoption("devsy_report")
    report_dir = Path(explicit).resolve() if explicit else config.rootpath / "reports" / f"devsy-{run_id}"
    for name in ("devsy_case_timeout", "devsy_cleanup_budget"):
        if config.getoption(name) <= 0:
            raise pytest.UsageError(f"--{name.replace('_', '-')} must be a positive number of seconds")
    run_dir = RunPaths(run_id, harness_root()).run_dir  # a simulated column's stand-in keeps its state there
    return HarnessOptions(
        providers=tuple(sorted((p.for_run(run_dir) for p in providers.values()), key=lambda p: p.name)),
        required=tuple(required),
        report_dir=report_dir,
        report_explicit=bool(explicit),
        keep_on_failure=bool(config.getoption("devsy_keep_on_failure")),
        case_timeout=float(config.getoption("devsy_case_timeout")),
        cleanup_budget=float(config.getoption("devsy_cleanup_budget")),
        cli=(config.getoption("devsy_cli") or default_cli(),),
        run_id=run_id,
        root=harness_root(),
        case_filter=_split(config.getoption("devsy_case")),
        manifest=config.getoption("devsy_manifest"),
        suites_include=_split(config.getoption("devsy_suite")),
        suites_exclude=_split(config.getoption("devsy_suites_except")),
    )
