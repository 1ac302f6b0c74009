"""parity.md and parity.html from a ParityTable: verdict first, counts per column, cases grouped by suite, one
footnote per distinct reason, durations, and the figures cases recorded."""

from __future__ import annotations

import re
from pathlib import Path

from harness.catalogue import Manifest
from harness.parity import ParityTable, outcome_counts
from harness.parity_html import render_page
from harness.parity_view import DECISION_WORDS, ParityView, ViewCell, build_view, duration_text
from harness.report import Report

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#])")


def md_text(text: str) -> str:
    """Inline Markdown that shows `text` as written: no table break, no emphasis, no raw HTML."""
    flat = " ".join(text.split())
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", flat)


def md_code(text: str) -> str:
    """A code span; falls back to escaped text when `text` holds a backtick (it could close the span)."""
    if "`" in text or not text.strip():
        return md_text(text)
    return "`" + " ".join(text.split()).replace("|", "\\|") + "`"


def _fenced(text: str, indent: str) -> list[str]:
    # A fence longer than any backtick run in the text, so the text cannot close it.
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{indent}{fence}text", *(f"{indent}{line}" for line in text.splitlines()), f"{indent}{fence}"]


def _probe_status(probe: dict[str, object]) -> str:
    if probe.get("ok"):
        return "ok"
    return "FAILED (tooling usable: cases that need no boot ran)" if probe.get("usable") else "FAILED"


def run_lines(report: Report) -> list[str]:
    """The run's facts under the verdict, plain text (each renderer escapes them)."""
    lines = [f"Results: {outcome_counts(report)}; wall {report.wall_seconds:.0f} s. Providers requested: "
             f"{', '.join(report.requested) or '(none)'}; required: {', '.join(report.required) or '(none)'}."]
    if report.narrowed:
        lines.append(f"Narrowed run ({', '.join(report.narrowed_by)}): not usable as a cutover gate.")
    if report.shard is not None:
        lines.append(f"Shard: suites {', '.join(report.shard) or '(none left)'}; the other shards' reports cover "
                     "the rest.")
    return lines


def _md_cell(cell: ViewCell) -> str:
    label = f"**{cell.label}**" if cell.kind in ("fail", "missing") else cell.label
    note = f" [{cell.note}]" if cell.note is not None else ""
    took = f" · {duration_text(cell.duration)}" if cell.duration is not None else ""
    return f"{label}{note}{took}"


def _md_row(first: str, rest: list[str]) -> str:
    return "| " + " | ".join([first, *rest]) + " |"


def _md_cases(view: ParityView) -> list[str]:
    width = len(view.providers)
    lines = [_md_row("case", [md_text(view.header(p)) for p in view.providers]), "|---|" + "---|" * width]
    lines += [_md_row(f"**{label}**", [str(n) for n in per_column]) for label, per_column in view.counts]
    for group in view.groups:
        head = f"**{md_text(group.suite)}**" + (f": {md_text(group.title)}" if group.title else "")
        lines.append(_md_row(head, [""] * width))
        lines += [_md_row(md_code(row.name), [_md_cell(cell) for cell in row.cells]) for row in group.rows]
    return lines


def _md_simulated(view: ParityView) -> list[str]:
    if not view.simulated_notes:
        return []
    return ["", "### Simulated columns", "", *(f"- {md_text(note)}" for note in view.simulated_notes)]


def _md_notes(view: ParityView) -> list[str]:
    lines = ["", "### Notes", ""]
    for note in view.footnotes:
        where = f"{note.cells} cell{'s' if note.cells != 1 else ''}: {', '.join(note.providers)}"
        lines.append(f"- **[{note.number}]** {md_text(note.summary)} ({md_text(where)})")
        rest = "\n".join(note.reason.strip().splitlines()[1:])
        if rest.strip():
            lines += ["", *_fenced(rest, "  "), ""]
    return lines if view.footnotes else []


def _md_figures(view: ParityView) -> list[str]:
    if not view.figures:
        return []
    width = len(view.figure_providers)
    lines = ["", "## Figures", "", _md_row("figure", [md_text(view.header(p)) for p in view.figure_providers]),
             "|---|" + "---|" * width]
    for group in view.figures:
        lines.append(_md_row(f"**{md_code(group.case_id)}**", [""] * width))
        lines += [_md_row(md_code(row.name), [md_text(v.shown) if v else "" for v in row.values])
                  for row in group.rows]
    return lines


def render_markdown(table: ParityTable, report: Report, manifest: Manifest | None = None) -> str:
    view = build_view(table, report, manifest)
    lines = [f"# Parity table: run {md_text(report.run_id)}", "", "## Cutover verdict", ""]
    lines += [f"- **{DECISION_WORDS.get(v.decision, v.decision)}** {md_text(v.sentence())}" for v in view.verdicts]
    lines += ["", *(md_text(line) for line in run_lines(report)), "", "## Cases", ""]
    lines += _md_cases(view) + _md_simulated(view) + _md_notes(view) + _md_figures(view)
    lines += ["", "## Probes", ""]
    for backend, probe in sorted(report.probes.items()):
        lines.append(f"- {md_text(backend)}: {_probe_status(probe)}: {md_text(str(probe.get('summary', '')))}")
    if not report.probes:
        lines.append("- (no backend was probed)")
    lines.append("")
    return "\n".join(lines)


def render_html(table: ParityTable, report: Report, manifest: Manifest | None = None) -> str:
    view = build_view(table, report, manifest)
    probes = [(backend, _probe_status(probe), str(probe.get("summary", "")))
              for backend, probe in sorted(report.probes.items())]
    return render_page(view, report.run_id, run_lines(report), probes)


def write_parity(table: ParityTable, report: Report, directory: Path,
                 manifest: Manifest | None = None) -> tuple[Path, Path]:
    md, page = directory / "parity.md", directory / "parity.html"
    md.write_text(render_markdown(table, report, manifest))
    page.write_text(render_html(table, report, manifest))
    return md, page
