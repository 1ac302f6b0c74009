"""parity.md and parity.html from a ParityTable."""

from __future__ import annotations

import html
from pathlib import Path

from harness.parity import ParityTable, outcome_counts
from harness.report import Report

_CSS = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #999;"
    "padding:4px 8px;vertical-align:top}.pass{background:#cfc}.fail,.missing{background:#fcc}"
    ".not-runnable{background:#ffd}.n\\.a\\.,.not-run{color:#777}"
)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _probe_status(probe: dict[str, object]) -> str:
    if probe.get("ok"):
        return "ok"
    return "FAILED (tooling usable: cases that need no boot ran)" if probe.get("usable") else "FAILED"


def render_markdown(table: ParityTable, report: Report) -> str:
    lines = [
        f"# Parity table: run {report.run_id}",
        "",
        f"Results: {outcome_counts(report)}. Providers requested: {', '.join(report.requested) or '(none)'}; "
        f"required: {', '.join(report.required) or '(none)'}.",
    ]
    if report.narrowed:
        lines += ["", f"**Narrowed run** ({', '.join(report.narrowed_by)}): not usable as a cutover gate."]
    if report.shard is not None:
        lines += ["", f"**Shard**: suites {', '.join(report.shard) or '(none left)'}; the other shards' reports "
                  "cover the rest."]
    lines += ["", "## Cutover verdict", ""]
    lines += [f"- {verdict.sentence()}" for verdict in table.verdicts]
    lines += ["", "## Cases", "", "| case | " + " | ".join(table.providers) + " |"]
    lines.append("|---|" + "---|" * len(table.providers))
    for row in table.rows:
        lines.append(f"| `{row.case_id}` | " + " | ".join(_md_escape(cell.text) for cell in row.cells) + " |")
    lines += ["", "## Probes", ""]
    for backend, probe in sorted(report.probes.items()):
        status = _probe_status(probe)
        lines.append(f"- {backend}: {status}: {_md_escape(str(probe.get('summary', '')))}")
    if not report.probes:
        lines.append("- (no backend was probed)")
    lines.append("")
    return "\n".join(lines)


def render_html(table: ParityTable, report: Report) -> str:
    esc = html.escape
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>Parity table: run {esc(report.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Parity table: run {esc(report.run_id)}</h1>",
        f"<p>Results: {esc(outcome_counts(report))}. Providers requested: {esc(', '.join(report.requested))}; "
        f"required: {esc(', '.join(report.required) or '(none)')}.</p>",
    ]
    if report.narrowed:
        parts.append(f"<p><strong>Narrowed run</strong> ({esc(', '.join(report.narrowed_by))}): not a gate.</p>")
    parts.append("<h2>Cutover verdict</h2><ul>")
    parts += [f"<li>{esc(verdict.sentence())}</li>" for verdict in table.verdicts]
    parts.append("</ul><h2>Cases</h2><table><tr><th>case</th>")
    parts += [f"<th>{esc(provider)}</th>" for provider in table.providers]
    parts.append("</tr>")
    for row in table.rows:
        parts.append(f"<tr><td title='{esc(row.title)}'><code>{esc(row.case_id)}</code></td>")
        for cell in row.cells:
            parts.append(f"<td class='{esc(cell.kind)}' title='{esc(cell.detail)}'>{esc(cell.text)}</td>")
        parts.append("</tr>")
    parts.append("</table><h2>Probes</h2><ul>")
    for backend, probe in sorted(report.probes.items()):
        status = _probe_status(probe)
        parts.append(f"<li>{esc(backend)}: {status}: {esc(str(probe.get('summary', '')))}</li>")
    parts.append("</ul></body></html>\n")
    return "".join(parts)


def write_parity(table: ParityTable, report: Report, directory: Path) -> tuple[Path, Path]:
    md, page = directory / "parity.md", directory / "parity.html"
    md.write_text(render_markdown(table, report))
    page.write_text(render_html(table, report))
    return md, page

