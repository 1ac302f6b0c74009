"""parity.html: one self-contained page (inline CSS, no script, no external asset) from a ParityView."""

from __future__ import annotations

from html import escape

from harness.parity import NO, UNDECIDED, YES
from harness.parity_view import DECISION_WORDS, SIMULATED_BADGE, ParityView, ViewCell, duration_text

_DECISION_CLASS = {YES: "yes", NO: "no", UNDECIDED: "undecided"}
_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em 2em;color:#222}
h1{font-size:1.5em;margin:0 0 .5em}h2{font-size:1.2em;margin:1.5em 0 .5em}
.verdict{padding:.5em .8em;margin:.3em 0;border-left:6px solid;border-radius:3px}
.verdict.yes{background:#e6f6e6;border-color:#2a2}.verdict.no{background:#fde8e8;border-color:#c22}
.verdict.undecided{background:#fff6dc;border-color:#d90}.verdict b{margin-right:.5em}
.run{color:#555}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 8px;vertical-align:top;text-align:left}
thead th{background:#f0f0f0;position:sticky;top:0}
tr.count th{background:#fafafa;font-weight:normal}tr.count td{text-align:right;background:#fafafa}
tr.suite th{background:#e8eef8;text-align:left;padding-top:6px}
tr.suite .title{font-weight:normal;color:#445}
td.case code{font-size:13px}
/* Two lines of a case's title at most (the whole title on hover), so a long one does not stretch its row. */
td.case .title{display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical;overflow:hidden;color:#777;
font-size:12px;max-width:34em}
td.pass{background:#dff3df}td.fail,td.missing{background:#f9d6d6;font-weight:bold}
td.not-runnable{background:#fff3cc}td.n\\.a\\.,td.not-run{color:#888;background:#f7f7f7}
.dur{color:#666;font-size:12px;font-weight:normal;margin-left:.4em}
sup a{text-decoration:none}td.n\\.a\\. sup a,td.not-run sup a{color:#999}
ol.notes li{margin:.4em 0}.notes .where{color:#666}
pre{white-space:pre-wrap;background:#f7f7f7;padding:.5em;font-size:12px;max-width:110em}
td.fig{font-family:monospace;text-align:right}
.figures tbody tr:not(.suite) th{font:12px monospace}
tr.count td.bad{background:#f9d6d6;font-weight:bold}
th.simulated{background:#ece6f6}.badge{font-size:11px;font-weight:normal;background:#7a5ea8;color:#fff;
padding:0 .4em;border-radius:3px}.simulated-notes{color:#444}
"""


def _cell(cell: ViewCell) -> str:
    took = duration_text(cell.duration) if cell.duration is not None else ""
    hover = "; ".join(part for part in (f"took {took}" if took else "did not run", cell.hint) if part)
    note = f"<sup><a href='#note-{cell.note}'>{cell.note}</a></sup>" if cell.note is not None else ""
    dur = f"<span class='dur'>{escape(took)}</span>" if took else ""
    return f"<td class='{escape(cell.kind)}' title='{escape(hover)}'>{escape(cell.label)}{note}{dur}</td>"


def _cases(view: ParityView) -> list[str]:
    width = len(view.providers) + 1
    parts = ["<table class='cases'><thead><tr><th>case</th>"]
    parts += [f"<th class='simulated'>{escape(p)} <span class='badge'>{SIMULATED_BADGE}</span></th>"
              if p in view.simulated else f"<th>{escape(p)}</th>" for p in view.providers]
    parts.append("</tr>")
    for label, per_column in view.counts:
        # A failed or missing result anywhere is what a maintainer looks for first.
        bad = label in ("failed", "missing")
        parts.append(f"<tr class='count'><th>{escape(label)}</th>" + "".join(
            f"<td class='bad'>{n}</td>" if bad and n else f"<td>{n}</td>" for n in per_column) + "</tr>")
    parts.append("</thead>")
    for group in view.groups:
        title = f" <span class='title'>{escape(group.title)}</span>" if group.title else ""
        parts.append(f"<tbody><tr class='suite'><th colspan='{width}'>{escape(group.suite)}{title}</th></tr>")
        for row in group.rows:
            hover = f"{row.case_id}: {row.title}"
            parts.append(f"<tr><td class='case' title='{escape(hover)}'><code>{escape(row.name)}</code>"
                         f"<span class='title'>{escape(row.title)}</span></td>")
            parts += [_cell(cell) for cell in row.cells]
            parts.append("</tr>")
        parts.append("</tbody>")
    parts.append("</table>")
    return parts


def _simulated(view: ParityView) -> list[str]:
    if not view.simulated_notes:
        return []
    return ["<h2>Simulated columns</h2><ul class='simulated-notes'>",
            *(f"<li>{escape(note)}</li>" for note in view.simulated_notes), "</ul>"]


def _notes(view: ParityView) -> list[str]:
    if not view.footnotes:
        return []
    parts = ["<h2>Notes</h2><ol class='notes'>"]
    for note in view.footnotes:
        where = f"{note.cells} cell{'s' if note.cells != 1 else ''}: {', '.join(note.providers)}"
        rest = "\n".join(note.reason.strip().splitlines()[1:])
        more = f"<details><summary>evidence</summary><pre>{escape(rest)}</pre></details>" if rest.strip() else ""
        parts.append(f"<li id='note-{note.number}' value='{note.number}'>{escape(note.summary)} "
                     f"<span class='where'>({escape(where)})</span>{more}</li>")
    parts.append("</ol>")
    return parts


def _figures(view: ParityView) -> list[str]:
    if not view.figures:
        return []
    width = len(view.figure_providers) + 1
    parts = ["<h2>Figures</h2><table class='figures'><thead><tr><th>figure</th>"]
    parts += [f"<th>{escape(p)}</th>" for p in view.figure_providers]
    parts.append("</tr></thead>")
    for group in view.figures:
        parts.append(f"<tbody><tr class='suite'><th colspan='{width}'>{escape(group.case_id)}</th></tr>")
        for row in group.rows:
            cells = "".join(
                f"<td class='fig' title='{escape(v.full)}'>{escape(v.shown)}</td>" if v else "<td></td>"
                for v in row.values
            )
            parts.append(f"<tr><th>{escape(row.name)}</th>{cells}</tr>")
        parts.append("</tbody>")
    parts.append("</table>")
    return parts


def render_page(view: ParityView, run_id: str, run_lines: list[str],
                probes: list[tuple[str, str, str]]) -> str:
    """The whole page; every text from the report or the manifest is escaped."""
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Parity table: run {escape(run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Parity table: run {escape(run_id)}</h1>",
    ]
    for v in view.verdicts:
        css = _DECISION_CLASS.get(v.decision, "undecided")
        word = DECISION_WORDS.get(v.decision, v.decision)
        parts.append(f"<div class='verdict {css}'><b>{escape(word)}</b>{escape(v.sentence())}</div>")
    parts += [f"<p class='run'>{escape(line)}</p>" for line in run_lines]
    parts.append("<h2>Cases</h2>")
    parts += _cases(view) + _simulated(view) + _notes(view) + _figures(view)
    parts.append("<h2>Probes</h2><ul>")
    parts += [f"<li>{escape(backend)}: {escape(status)}: {escape(summary)}</li>" for backend, status, summary in probes]
    if not probes:
        parts.append("<li>(no backend was probed)</li>")
    parts.append("</ul></body></html>\n")
    return "".join(parts)
