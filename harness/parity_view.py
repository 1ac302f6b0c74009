"""What the parity page shows, built once for both renderers: cells with footnote numbers (one per distinct
reason), counts per column, cases grouped by suite, and the figures cases recorded."""

from __future__ import annotations

from dataclasses import dataclass

from harness.catalogue import Manifest, result_id
from harness.parity import (
    C_FAIL, C_MISSING, C_NA, C_NOT_RUN, C_NOT_RUNNABLE, C_PASS, NO, UNDECIDED, YES, Cell, ParityTable, Verdict,
)
from harness.providers import SIM_SUFFIX, SIMULATORS, split_provider_id
from harness.records import ERROR, CaseRecord, Figure
from harness.report import Report

# (kind, label in a cell, label of the count row): the count rows are shown in this order.
KINDS: tuple[tuple[str, str, str], ...] = (
    (C_PASS, "pass", "passed"),
    (C_FAIL, "fail", "failed"),
    (C_NOT_RUNNABLE, "not runnable", "not runnable"),
    (C_NA, "n.a.", "n.a."),
    (C_NOT_RUN, "not run", "not run"),
    (C_MISSING, "missing", "missing"),
)
# Count rows shown even when every column has zero; the others only when some column has one.
ALWAYS_COUNTED = (C_PASS, C_FAIL, C_NOT_RUNNABLE, C_NA)
# Footnotes are numbered in this order of their cells' kinds.
NOTE_ORDER = (C_FAIL, C_MISSING, C_NOT_RUNNABLE, C_NOT_RUN, C_NA)
_LABELS = {kind: label for kind, label, _ in KINDS}
# A figure text longer than this is cut in the cell (a sha256 reads as its first 12 digits); the full value
# stays in report.json (and the HTML title).
FIGURE_WIDTH = 16
DECISION_WORDS = {YES: "YES", NO: "NO", UNDECIDED: "UNDECIDED"}


def duration_text(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds >= 0.1 else f"{seconds * 1000:.0f} ms"


@dataclass(frozen=True)
class Footnote:
    number: int
    reason: str
    cells: int
    providers: tuple[str, ...]

    @property
    def summary(self) -> str:
        return _first_line(self.reason)


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


@dataclass(frozen=True)
class ViewCell:
    kind: str
    label: str
    note: int | None
    # A failure's first reason line, for the HTML cell's hover (the rarer, urgent cells; the many alike
    # not-runnable and n.a. cells point to their footnote only).
    hint: str
    # Seconds the case took; None when it did not run (a skip's duration is only the probe lookup).
    duration: float | None


@dataclass(frozen=True)
class ViewRow:
    case_id: str
    name: str
    title: str
    cells: tuple[ViewCell, ...]


@dataclass(frozen=True)
class Group:
    suite: str
    title: str
    rows: tuple[ViewRow, ...]


@dataclass(frozen=True)
class FigureValue:
    shown: str
    full: str


@dataclass(frozen=True)
class FigureRow:
    name: str
    values: tuple[FigureValue | None, ...]


@dataclass(frozen=True)
class FigureGroup:
    case_id: str
    rows: tuple[FigureRow, ...]


@dataclass(frozen=True)
class ParityView:
    providers: tuple[str, ...]
    verdicts: tuple[Verdict, ...]
    counts: tuple[tuple[str, tuple[int, ...]], ...]
    groups: tuple[Group, ...]
    footnotes: tuple[Footnote, ...]
    figure_providers: tuple[str, ...]
    figures: tuple[FigureGroup, ...]
    # Columns run against a stand-in: their headers carry SIMULATED_BADGE, and simulated_notes say what that means.
    simulated: tuple[str, ...] = ()
    simulated_notes: tuple[str, ...] = ()

    def header(self, provider: str) -> str:
        return f"{provider} ({SIMULATED_BADGE})" if provider in self.simulated else provider


SIMULATED_BADGE = "simulated"


def simulated_notes(simulated: tuple[str, ...]) -> tuple[str, ...]:
    """One sentence per stand-in behind the simulated columns: what it is, and that it never counts."""
    by_backend: dict[str, list[str]] = {}
    for provider in simulated:
        by_backend.setdefault(split_provider_id(provider)[1], []).append(provider)
    notes = []
    for backend, columns in by_backend.items():
        real = ", ".join(name.removesuffix(SIM_SUFFIX) for name in columns)
        notes.append(f"{', '.join(columns)} ({SIMULATED_BADGE}): {SIMULATORS[backend].describes}. A stand-in imitates "
                     f"the backend's command line without the backend itself, so these cells are never evidence for "
                     f"{backend}: they count toward no verdict, no cutover and no --devsy-require of {real}.")
    return tuple(notes)


def _reason_key(cell: Cell, provider: str) -> str:
    # "<provider> not runnable here: ..." in the <provider> column says the column's name twice; without it the
    # same probe failure on two providers is one footnote.
    detail = cell.detail.strip()
    prefix = f"{provider} "
    return detail[len(prefix):] if detail.startswith(prefix) else detail


def _duration(cell: Cell, record: CaseRecord | None) -> float | None:
    return record.duration if record is not None and cell.kind in (C_PASS, C_FAIL) else None


def _label(cell: Cell, record: CaseRecord | None) -> str:
    if record is not None and record.outcome == ERROR:
        return "error"
    return _LABELS.get(cell.kind, cell.kind)


def format_figure(value: Figure) -> FigureValue:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = str(value)
        return FigureValue(text if len(text) <= FIGURE_WIDTH else text[:12] + "…", text)
    text = f"{value:,}" if isinstance(value, int) else f"{value:g}"
    return FigureValue(text, str(value))


def _figures(report: Report, table: ParityTable) -> tuple[tuple[str, ...], tuple[FigureGroup, ...]]:
    recorded = {(row.case_id, p): report.results[result_id(row.case_id, p)].figures
                for row in table.rows for p in table.providers
                if result_id(row.case_id, p) in report.results and report.results[result_id(row.case_id, p)].figures}
    providers = tuple(p for p in table.providers if any(q == p for _, q in recorded))
    groups = []
    for row in table.rows:
        names = sorted({name for (case_id, _), figs in recorded.items() if case_id == row.case_id for name in figs})
        if not names:
            continue
        rows = tuple(
            FigureRow(name, tuple(
                format_figure(recorded[(row.case_id, p)][name])
                if name in recorded.get((row.case_id, p), {}) else None
                for p in providers
            ))
            for name in names
        )
        groups.append(FigureGroup(row.case_id, rows))
    return providers, tuple(groups)


def _footnote_numbers(table: ParityTable) -> dict[str, int]:
    """A number per distinct reason; failures' reasons first (what a maintainer reads first), then by first use."""
    first: dict[str, tuple[int, int]] = {}
    for row in table.rows:
        for provider, cell in zip(table.providers, row.cells, strict=True):
            if cell.kind != C_PASS and cell.detail.strip():
                rank = (NOTE_ORDER.index(cell.kind) if cell.kind in NOTE_ORDER else len(NOTE_ORDER), len(first))
                key = _reason_key(cell, provider)
                first[key] = min(first.get(key, rank), rank)
    return {key: number for number, key in enumerate(sorted(first, key=first.__getitem__), start=1)}


def _counts(table: ParityTable) -> tuple[tuple[str, tuple[int, ...]], ...]:
    rows = []
    for kind, _, label in KINDS:
        per_column = tuple(sum(row.cells[i].kind == kind for row in table.rows) for i in range(len(table.providers)))
        if kind in ALWAYS_COUNTED or any(per_column):
            rows.append((label, per_column))
    return tuple(rows)


def build_view(table: ParityTable, report: Report, manifest: Manifest | None = None) -> ParityView:
    """The page's content; `manifest` gives the suite titles (without it a group is headed by its suite name)."""
    titles = {suite.name: suite.title for suite in manifest.suites} if manifest is not None else {}
    numbers = _footnote_numbers(table)
    members: dict[str, list[str]] = {}
    grouped: dict[str, list[ViewRow]] = {}
    for row in table.rows:
        cells = []
        for provider, cell in zip(table.providers, row.cells, strict=True):
            record = report.results.get(result_id(row.case_id, provider))
            key = _reason_key(cell, provider)
            note = numbers.get(key) if cell.kind != C_PASS else None
            if note is not None:
                members.setdefault(key, []).append(provider)
            hint = _first_line(key) if note is not None and cell.kind in (C_FAIL, C_MISSING) else ""
            cells.append(ViewCell(cell.kind, _label(cell, record), note, hint, _duration(cell, record)))
        suite, _, name = row.case_id.partition("/")
        grouped.setdefault(suite, []).append(ViewRow(row.case_id, name, row.title, tuple(cells)))
    footnotes = tuple(
        Footnote(number, key, len(members[key]), tuple(p for p in table.providers if p in members[key]))
        for key, number in sorted(numbers.items(), key=lambda item: item[1])
    )
    groups = tuple(Group(suite, titles.get(suite, ""), tuple(rows)) for suite, rows in grouped.items())
    figure_providers, figures = _figures(report, table)
    shown = tuple(p for p in table.simulated if p in table.providers)
    return ParityView(table.providers, table.verdicts, _counts(table), groups, footnotes, figure_providers, figures,
                      shown, simulated_notes(shown))
