"""The harness's state for one pytest process: options, manifest, run paths, and (on the controller) records."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.case_context import CaseContext, CaseSettings
from harness.catalogue import Manifest, ManifestError, load_manifest, result_id
from harness.options import HarnessOptions
from harness.ownership import RunPaths
from harness.probes import ProbeResult, probe_once, recorded_probes
from harness.providers import Provider
from harness.records import CaseRecord
from harness.report import Report
from harness.runstate import ensure_started
from harness.sweep import SweepReport


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class HarnessSession:
    options: HarnessOptions
    manifest: Manifest
    token: str
    is_controller: bool
    engaged: bool
    narrowed_by: list[str] = field(default_factory=list)
    records: dict[str, CaseRecord] = field(default_factory=dict)
    sweeps: list[SweepReport] = field(default_factory=list)
    started_at: str = field(default_factory=now_iso)
    started_clock: float = field(default_factory=time.monotonic)
    report: Report | None = None
    # The shard's suites (None: the whole catalogue).
    suites: tuple[str, ...] | None = None

    @property
    def paths(self) -> RunPaths:
        return RunPaths(self.options.run_id, self.options.root)

    def providers_for(self, case_id: str) -> list[Provider]:
        """The selected providers this case applies to, sorted by id (identical on every xdist worker)."""
        return [p for p in self.options.providers if self.manifest.applies(case_id, p.name)]

    def in_shard(self, case_id: str) -> bool:
        """Is this case in the run's shard (always, without --devsy-suite / --devsy-suites-except)?"""
        return self.suites is None or not case_id or case_id.partition("/")[0] in self.suites

    def needs_boot(self, case_id: str) -> bool:
        case = self.manifest.case(case_id)
        return case.needs_boot if case is not None else True

    def selected(self, case_id: str, provider: str) -> bool:
        """Does --devsy-case keep this result id (no filter keeps everything)?"""
        if not self.options.case_filter:
            return True
        rid = result_id(case_id, provider)
        return any(wanted in (case_id, rid) for wanted in self.options.case_filter)

    def new_case(self, case_id: str, provider: Provider, nodeid: str, probe: ProbeResult | None = None
                 ) -> CaseContext:
        settings = CaseSettings(
            cli=self.options.cli,
            case_timeout=self.options.case_timeout,
            cleanup_budget=self.options.cleanup_budget,
            keep_on_failure=self.options.keep_on_failure,
            report_dir=self.options.report_dir,
        )
        return CaseContext(case_id=case_id, provider=provider, nodeid=nodeid, paths=self.paths, settings=settings,
                           probe=probe)

    def prepare(self, provider: Provider) -> ProbeResult:
        """Start the run (sweeping leftovers of this run id once) and return the provider backend's probe."""
        swept = ensure_started(self.paths, self.token)
        if swept is not None:
            self.sweeps.append(swept)
        return probe_once(provider.target, self.options.run_id, self.paths.probes_dir, provider.environment())

    def probe_of(self, backend: str) -> ProbeResult | None:
        return recorded_probes(self.paths.probes_dir).get(backend)

    def build_report(self, exit_status: int, command: list[str]) -> Report:
        return Report(
            run_id=self.options.run_id,
            manifest=self.manifest.source,
            requested=self.options.requested,
            required=list(self.options.required),
            narrowed=bool(self.narrowed_by),
            narrowed_by=list(self.narrowed_by),
            suites=list(self.suites) if self.suites is not None else None,
            probes={name: probe.to_dict() for name, probe in recorded_probes(self.paths.probes_dir).items()},
            results=dict(self.records),
            started_at=self.started_at,
            finished_at=now_iso(),
            wall_seconds=round(time.monotonic() - self.started_clock, 2),
            exit_status=exit_status,
            command=command,
        )


def narrowing(config: pytest.Config, case_filter: tuple[str, ...]) -> list[str]:
    """How the command line narrows the catalogue (each makes the run unusable as a gate)."""
    option = config.option
    reasons = []
    if getattr(option, "keyword", ""):
        reasons.append(f"-k {option.keyword}")
    if getattr(option, "markexpr", ""):
        reasons.append(f"-m {option.markexpr}")
    if getattr(option, "lf", False):
        reasons.append("--lf")
    if getattr(option, "stepwise", False) or getattr(option, "stepwise_skip", False):
        reasons.append("--stepwise")
    if getattr(option, "deselect", None):
        reasons.append(f"--deselect {' '.join(option.deselect)}")
    if case_filter:
        reasons.append(f"--devsy-case {','.join(case_filter)}")
    node_args = [arg for arg in config.args if "::" in arg]
    if node_args:
        reasons.append(f"node id selection {' '.join(node_args)}")
    return reasons


def engaged(config: pytest.Config, scenarios_dir: Path | None) -> bool:
    """Does this pytest run target the catalogue (so it owns a report)?"""
    for name in ("devsy_report", "devsy_providers", "devsy_require", "devsy_case"):
        if config.getoption(name):
            return True
    if scenarios_dir is None:
        return False
    for arg in config.args:
        path = Path(arg.split("::", 1)[0]).resolve()
        if path == scenarios_dir or scenarios_dir in path.parents or path in scenarios_dir.parents:
            return True
    return False


def new_token() -> str:
    return uuid.uuid4().hex


def build_session(config: pytest.Config, options: HarnessOptions, scenarios_dir: Path | None) -> HarnessSession:
    workerinput = getattr(config, "workerinput", None)
    try:
        manifest = load_manifest(options.manifest)
        suites = manifest.select_suites(options.suites_include, options.suites_exclude)
    except (ValueError, ManifestError) as exc:
        raise pytest.UsageError(str(exc)) from None
    return HarnessSession(
        options=options,
        manifest=manifest,
        token=workerinput["devsy_session"] if workerinput and "devsy_session" in workerinput else new_token(),
        is_controller=workerinput is None,
        engaged=bool(workerinput["devsy_engaged"]) if workerinput and "devsy_engaged" in workerinput
        else engaged(config, scenarios_dir),
        narrowed_by=narrowing(config, options.case_filter),
        suites=suites,
    )
