"""report.json: the run as the controller saw it, and the files written next to it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.provenance import HostFacts, Provenance
from harness.providers import SIMULATED_PROVIDER_IDS, SIMULATORS, is_simulated
from harness.records import OUTCOMES, CaseRecord

REPORT_FILE = "report.json"
# Files a report directory holds; only these are cleared before a run (or a merge) writes it again.
OWNED_REPORT_FILES = (REPORT_FILE, "junit.xml", "parity.md", "parity.html")
# 2: provenance (manifest digest, commit, devsy version, host facts) and, for a merged report, its sources.
FORMAT = 2


class ReportError(ValueError):
    """report.json is missing or unreadable."""


@dataclass
class ReportSource:
    """One shard report a merged report was made from, with the host it ran on."""

    directory: str
    run_id: str
    suites: list[str] | None
    requested: list[str]
    exit_status: int | None
    wall_seconds: float
    host: HostFacts | None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["host"] = self.host.to_dict() if self.host is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ReportSource":
        host = data.get("host")
        return cls(directory=str(data.get("directory", "")), run_id=str(data.get("run_id", "")),
                   suites=list(data["suites"]) if data.get("suites") is not None else None,
                   requested=list(data.get("requested") or []), exit_status=data.get("exit_status"),
                   wall_seconds=float(data.get("wall_seconds", 0.0)),
                   host=HostFacts.from_dict(host) if isinstance(host, dict) else None)


@dataclass
class Report:
    run_id: str
    manifest: str
    requested: list[str]
    required: list[str]
    narrowed: bool = False
    narrowed_by: list[str] = field(default_factory=list)
    # A shard's suites (--devsy-suite / --devsy-suites-except); None: the whole catalogue.
    suites: list[str] | None = None
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, CaseRecord] = field(default_factory=dict)
    started_at: str = ""
    finished_at: str = ""
    wall_seconds: float = 0.0
    exit_status: int | None = None
    command: list[str] = field(default_factory=list)
    # None: a report written before format 2 (it cannot be merged).
    provenance: Provenance | None = None
    # A merged report's shard reports (empty for a run's own report).
    sources: list[ReportSource] = field(default_factory=list)

    @property
    def shard(self) -> tuple[str, ...] | None:
        return tuple(self.suites) if self.suites is not None else None

    def summary(self) -> dict[str, int]:
        counts = {outcome: 0 for outcome in OUTCOMES}
        for record in self.results.values():
            counts[record.outcome] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "run_id": self.run_id,
            "manifest": self.manifest,
            "command": self.command,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "wall_seconds": self.wall_seconds,
            "exit_status": self.exit_status,
            "narrowed": self.narrowed,
            "narrowed_by": self.narrowed_by,
            "suites": self.suites,
            "providers": {"requested": self.requested, "required": self.required},
            # Columns run against a stand-in for their backend's tooling (this run's, and every such column the
            # harness has): never counted for that backend.
            "simulated": {"columns": self.simulated_columns(), "all_columns": list(SIMULATED_PROVIDER_IDS),
                          "counts_for_backend": False,
                          "stand_ins": {backend: sim.describes for backend, sim in SIMULATORS.items()}},
            "provenance": self.provenance.to_dict() if self.provenance is not None else None,
            "sources": [source.to_dict() for source in self.sources],
            "probes": self.probes,
            "summary": self.summary(),
            "results": {rid: _result_dict(self.results[rid]) for rid in sorted(self.results)},
        }

    def simulated_columns(self) -> list[str]:
        """The simulated columns this run requested or holds results of."""
        seen = set(self.requested) | {record.provider for record in self.results.values()}
        return sorted(name for name in seen if is_simulated(name))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Report":
        providers = data.get("providers") or {}
        return cls(
            run_id=str(data.get("run_id", "")),
            manifest=str(data.get("manifest", "")),
            requested=list(providers.get("requested") or []),
            required=list(providers.get("required") or []),
            narrowed=bool(data.get("narrowed", False)),
            narrowed_by=list(data.get("narrowed_by") or []),
            suites=list(data["suites"]) if data.get("suites") is not None else None,
            probes=dict(data.get("probes") or {}),
            results={rid: CaseRecord.from_dict(rec) for rid, rec in (data.get("results") or {}).items()},
            started_at=str(data.get("started_at", "")),
            finished_at=str(data.get("finished_at", "")),
            wall_seconds=float(data.get("wall_seconds", 0.0)),
            exit_status=data.get("exit_status"),
            command=list(data.get("command") or []),
            provenance=Provenance.from_dict(data["provenance"]) if isinstance(data.get("provenance"), dict) else None,
            sources=[ReportSource.from_dict(source) for source in data.get("sources") or []],
        )


def _result_dict(record: CaseRecord) -> dict[str, Any]:
    data = record.to_dict()
    data["simulated"] = is_simulated(record.provider)  # a stand-in's result: never evidence for its backend
    return data


def write_report_json(report: Report, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / REPORT_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
    return path


def load_report(directory: Path) -> Report:
    path = directory / REPORT_FILE if directory.is_dir() else directory
    try:
        return Report.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise ReportError(f"no report at {path}; run the catalogue with --devsy-report {directory}") from None
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        raise ReportError(f"{path} is not a readable harness report: {exc}") from exc
