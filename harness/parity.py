"""The parity table (rows = cases, columns = providers) and the cutover verdict per backend."""

from __future__ import annotations

from dataclasses import dataclass

from harness.catalogue import Manifest, result_id
from harness.providers import BACKENDS, CATALOGUE_PROVIDER_IDS, SIMULATED_PROVIDER_IDS, provider_table
from harness.records import ERROR, FAIL, PASS, SKIP
from harness.report import Report

# Cell kinds
C_PASS, C_FAIL, C_NOT_RUNNABLE = "pass", "fail", "not-runnable"
C_NA, C_NOT_RUN, C_MISSING = "n.a.", "not-run", "missing"
YES, NO, UNDECIDED = "yes", "no", "cannot be decided"


@dataclass(frozen=True)
class Cell:
    kind: str
    text: str
    detail: str = ""


@dataclass(frozen=True)
class Row:
    case_id: str
    title: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Verdict:
    backend: str
    builtin: str
    external: str
    decision: str
    reason: str

    def sentence(self) -> str:
        if self.decision == YES:
            return f"{self.backend}: {self.external} may replace {self.builtin}: {self.reason}"
        if self.decision == NO:
            return f"{self.backend}: {self.external} may NOT replace {self.builtin}: {self.reason}"
        return f"{self.backend}: cutover {UNDECIDED}: {self.reason}"


@dataclass(frozen=True)
class ParityTable:
    providers: tuple[str, ...]
    rows: tuple[Row, ...]
    verdicts: tuple[Verdict, ...]
    # Columns run against a stand-in (harness/providers.py SIMULATORS): shown marked, never in a verdict.
    simulated: tuple[str, ...] = ()


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 160 else line[:157] + "..."


def cell_for(report: Report, manifest: Manifest, case_id: str, provider: str) -> Cell:
    reason = manifest.not_applicable_reason(case_id, provider)
    if reason is not None:
        return Cell(C_NA, "n.a.", reason)
    if report.shard is not None and case_id.partition("/")[0] not in report.shard:
        return Cell(C_NOT_RUN, "not run (other shard)", f"this run is the shard of: {', '.join(report.shard)}")
    record = report.results.get(result_id(case_id, provider))
    if record is None:
        if provider in report.requested:
            return Cell(C_MISSING, "missing", "requested, but the run produced no result (deselected or interrupted)")
        if provider not in provider_table():
            return Cell(C_NOT_RUN, "not run (no harness provider)", "no provider row in harness/providers.py yet")
        return Cell(C_NOT_RUN, "not run (not requested)", "not in --devsy-providers")
    why = _first_line(record.reason)
    if record.outcome == PASS:
        return Cell(C_PASS, "pass")
    if record.outcome == SKIP:
        return Cell(C_NOT_RUNNABLE, f"not runnable ({why})", record.reason)
    label = "fail" if record.outcome == FAIL else "fail (error)"
    return Cell(C_FAIL, f"{label}: {why}" if why else label, record.reason)


def verdict_for(report: Report, manifest: Manifest, backend: str) -> Verdict:
    """External may replace built-in on `backend` only when every case applicable to the external provider passes
    on it (external-only cases included) and every case applicable to both passes on both. Only the real columns
    decide: a simulated column's cells (`<kind>-<backend>-sim`) are never read here."""
    builtin, external = f"builtin-{backend}", f"external-{backend}"
    cases = [c for c in manifest.case_ids(report.shard) if manifest.applies(c, external)]
    # The cells that decide: the external provider's for each of its cases, the built-in's where the case applies.
    cells = {(c, p): cell_for(report, manifest, c, p) for c in cases for p in (builtin, external)
             if manifest.applies(c, p)}
    shared = [c for c in cases if (c, builtin) in cells]
    external_only = [c for c in cases if (c, builtin) not in cells]
    # A failure decides at once, whatever else is missing: an external-only shard, or a built-in that could not run
    # here, must not turn failing external cases into "cannot be decided".
    failing = sorted(f"{c}[{p}]" for (c, p), cell in cells.items() if cell.kind == C_FAIL)
    if failing:
        return Verdict(backend, builtin, external, NO, f"{len(failing)} failing: {', '.join(failing)}")
    if not shared:
        return Verdict(backend, builtin, external, UNDECIDED, "no catalogue case applies to both providers")
    of = {p: [c for c in cases if (c, p) in cells] for p in (builtin, external)}
    absent = [p for p in (builtin, external) if not any(cells[(c, p)].kind in (C_PASS, C_FAIL) for c in of[p])]
    if absent:
        ran = [p for p in (builtin, external) if p not in absent]
        why = "; ".join(f"{p} did not run ({cells[(of[p][0], p)].detail})" for p in absent)
        tally = "".join(
            f"; {p}: {sum(cells[(c, p)].kind == C_PASS for c in of[p])}/{len(of[p])} pass" for p in ran
        )
        return Verdict(backend, builtin, external, UNDECIDED, why + tally)
    unfinished = sorted((p, f"{c}[{p}]", cell.text) for (c, p), cell in cells.items() if cell.kind != C_PASS)
    if unfinished:
        # One reason per provider (usually the same probe for all its cases); the table below names each case.
        counts = {p: sum(1 for q, _, _ in unfinished if q == p) for p, _, _ in unfinished}
        reasons = {p: text for p, _, text in reversed(unfinished)}
        why = "; ".join(f"{p}: {counts[p]} cases, e.g. {text}" for p, text in sorted(reasons.items()))
        return Verdict(backend, builtin, external, UNDECIDED, f"not every applicable case ran ({why})")
    if report.narrowed:
        return Verdict(backend, builtin, external, UNDECIDED, f"the run was narrowed ({', '.join(report.narrowed_by)})")
    passed = f"all {len(shared)} applicable cases"
    also = ""
    if external_only:
        noun = "case passes" if len(external_only) == 1 else "cases pass"
        also = f"; the {len(external_only)} external-only {noun} on {external}"
    if report.shard is not None:
        return Verdict(backend, builtin, external, YES, f"{passed} of this shard ({', '.join(report.shard)}) pass on "
                       f"both{also}; the other shards decide the rest")
    return Verdict(backend, builtin, external, YES, f"{passed} pass on both{also}")


def build_parity(report: Report, manifest: Manifest) -> ParityTable:
    # The simulated columns a run has follow the real ones (a run without them does not show them).
    simulated = tuple(p for p in SIMULATED_PROVIDER_IDS if p in report.simulated_columns())
    providers = CATALOGUE_PROVIDER_IDS + simulated
    titles = {f"{s.name}/{c.name}": c.title for s in manifest.suites for c in s.cases}
    rows = tuple(
        Row(case_id, titles[case_id], tuple(cell_for(report, manifest, case_id, p) for p in providers))
        for case_id in manifest.case_ids()
    )
    verdicts = tuple(verdict_for(report, manifest, backend) for backend in BACKENDS)
    return ParityTable(providers=providers, rows=rows, verdicts=verdicts, simulated=simulated)


def outcome_counts(report: Report) -> str:
    counts = report.summary()
    return ", ".join(f"{counts[k]} {k}" for k in (PASS, FAIL, ERROR, SKIP))
