"""parity.md and parity.html read at a glance: verdict first, counts per column, suites as groups, one footnote per
distinct reason, durations, figures; well-formed, self-contained, and every report text escaped."""

from __future__ import annotations

import re
from collections import Counter
from html import unescape
from html.parser import HTMLParser

from harness.catalogue import Applies, Case, Manifest, Suite
from harness.parity import build_parity
from harness.parity_render import render_html, render_markdown
from harness.providers import CATALOGUE_PROVIDER_IDS
from harness.records import CaseRecord
from harness.report import Report

HOSTILE = "<script>alert(1)</script> & | `x` *y*"
PROBE_REASON = "not runnable here: probe microsandbox: FAILED: no KVM\n  $ msb run -> exit 1\n    no /dev/kvm"
MANIFEST = Manifest(
    suites=(
        Suite("lifecycle", "The lifecycle contract", (Case("up-fresh", "up works"), Case("delete", HOSTILE))),
        Suite("streams", "Streams <b>byte</b> for byte", (
            Case("large-stream", "throughput"),
            Case("docker-only", "docker only", Applies(backends=("docker",))),
        )),
    ),
    source="test",
)
SHA = "97c1ecda69f5986e37fa9f41e71a6ca8fba2eaf683ce97fe03966be034a1a286"


def _record(rid: str, outcome: str = "pass", reason: str = "", duration: float = 2.5, **extra: object) -> CaseRecord:
    case_id, provider = rid[:-1].split("[")
    return CaseRecord(rid, case_id, provider, f"scenarios/x.py::{rid}", outcome, duration, reason,
                      **extra)  # type: ignore[arg-type]


def _report() -> Report:
    """Docker passes (one failure, one error); every MicroSandbox cell is not runnable for one probe reason."""
    records = [
        _record("lifecycle/up-fresh[builtin-docker]", duration=4.417),
        _record("lifecycle/delete[builtin-docker]", "fail", f"AssertionError: {HOSTILE}\nmore lines"),
        _record("streams/large-stream[builtin-docker]", figures={"ssh_download_mb_per_s": 45.2, "bytes": 7923046}),
        _record("streams/docker-only[builtin-docker]"),
        _record("lifecycle/up-fresh[external-docker]"),
        _record("lifecycle/delete[external-docker]", "error", "RuntimeError: provider died"),
        _record("streams/large-stream[external-docker]", figures={"ssh_download_mb_per_s": 39.1, "agent_sha256": SHA}),
        _record("streams/docker-only[external-docker]"),
    ]
    for provider in ("builtin-microsandbox", "external-microsandbox"):
        records += [_record(f"{case}[{provider}]", "skip", f"{provider} {PROBE_REASON}", 0.001)
                    for case in ("lifecycle/up-fresh", "lifecycle/delete", "streams/large-stream")]
    requested = ["builtin-docker", "builtin-microsandbox", "external-docker", "external-microsandbox"]
    return Report(run_id="run-1", manifest="test", requested=requested, required=["builtin-docker"],
                  results={r.result_id: r for r in records},
                  probes={"docker": {"backend": "docker", "ok": True, "summary": "daemon answers", "steps": []}})


def _markdown() -> str:
    report = _report()
    return render_markdown(build_parity(report, MANIFEST), report, MANIFEST)


def _html() -> str:
    report = _report()
    return render_html(build_parity(report, MANIFEST), report, MANIFEST)


def _md_cells(line: str) -> list[str]:
    """The cells of a Markdown table row, splitting on pipes that are not escaped."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _md_table(markdown: str, heading: str) -> list[list[str]]:
    section = markdown.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [_md_cells(line) for line in rows if not line.startswith("|---")]


def _outside_fences(markdown: str) -> str:
    return re.sub(r"(?ms)^\s*(`{3,})text$.*?^\s*\1$", "", markdown)


class _Page(HTMLParser):
    """Checks that every element closes in order and records what the tests look at."""

    VOID = {"meta", "br", "hr", "img", "link", "input"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.data: list[tuple[tuple[str, ...], str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.data.append((tuple(self.stack), data))


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    assert parser.errors == [] and parser.stack == [], (parser.errors, parser.stack)
    return parser


def _cases_rows(page: str) -> list[list[str]]:
    """The case table's rows as lists of cell texts (th and td), in order."""
    body = page.split("<table class='cases'>", 1)[1].split("</table>", 1)[0]
    return [[unescape(" ".join(re.sub(r"<[^>]+>", " ", cell).split()))
             for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)]


def test_one_footnote_per_distinct_reason_in_both_formats() -> None:
    # The verdict quotes a reason too; the table and its notes are what is counted here.
    markdown, page = _markdown().split("## Cases", 1)[1], _html().split("<h2>Cases</h2>", 1)[1]
    summary = "not runnable here: probe microsandbox: FAILED: no KVM"
    # Six cells (two providers, three cases each) carry the one probe reason: one footnote, six markers.
    assert markdown.count(summary) == 1 and page.count(summary) == 1
    note = next(line for line in markdown.splitlines() if summary in line)
    number = re.match(r"- \*\*\[(\d+)\]\*\*", note).group(1)  # type: ignore[union-attr]
    assert "(6 cells: builtin-microsandbox, external-microsandbox)" in note
    assert markdown.count(f"not runnable [{number}]") == 6
    assert page.count(f"href='#note-{number}'") == 6 and page.count(f"id='note-{number}'") == 1
    # The evidence under the first line is kept once, not per cell.
    assert markdown.count("$ msb run -> exit 1") == 1 and page.count("$ msb run -&gt; exit 1") == 1
    # Failures are footnoted first; every reason in the table has its own number.
    assert re.search(r"- \*\*\[1\]\*\* AssertionError: ", markdown)
    numbers = re.findall(r"^- \*\*\[(\d+)\]\*\*", markdown, re.M)
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)] and len(numbers) == 4


def test_counts_per_column_match_the_report() -> None:
    report, markdown, page = _report(), _markdown(), _html()
    by_provider = Counter((r.provider, r.outcome) for r in report.results.values())
    rows = {row[0].strip("*"): row[1:] for row in _md_table(markdown, "Cases")}
    html_rows = {row[0]: row[1:] for row in _cases_rows(page)}
    for i, provider in enumerate(CATALOGUE_PROVIDER_IDS):
        expected = {
            "passed": by_provider[(provider, "pass")],
            "failed": by_provider[(provider, "fail")] + by_provider[(provider, "error")],
            "not runnable": by_provider[(provider, "skip")],
            "n.a.": sum(not MANIFEST.applies(c, provider) for c in MANIFEST.case_ids()),
        }
        for label, count in expected.items():
            assert rows[label][i] == str(count), (provider, label)
            assert html_rows[label][i] == str(count), (provider, label)
    assert rows["passed"][:3] == ["3", "0", "3"] and rows["failed"][2] == "1" and rows["n.a."][1] == "1"
    # "not run" and "missing" get a count row only when some cell is one.
    assert "not run" not in rows and "missing" not in rows


def test_cases_are_grouped_under_their_suite_title() -> None:
    rows = _md_table(_markdown(), "Cases")
    counted = {"case", "**passed**", "**failed**", "**not runnable**", "**n.a.**", "**not run**", "**missing**"}
    firsts = [row[0] for row in rows if row[0] not in counted]
    assert firsts == [
        "**lifecycle**: The lifecycle contract", "`up-fresh`", "`delete`",
        "**streams**: Streams &lt;b&gt;byte&lt;/b&gt; for byte", "`large-stream`", "`docker-only`",
    ]
    group_rows = [row for row in rows if row[0].startswith("**lifecycle**") or row[0].startswith("**streams**")]
    assert all(cell == "" for row in group_rows for cell in row[1:])
    html_rows = _cases_rows(_html())
    suites = [row[0] for row in html_rows if len(row) == 1]
    assert suites == ["lifecycle The lifecycle contract", "streams Streams <b>byte</b> for byte"]


def test_figures_and_durations_are_shown() -> None:
    markdown, page = _markdown(), _html()
    figures = _md_table(markdown, "Figures")
    assert figures[0] == ["figure", "builtin-docker", "external-docker"]
    assert ["`ssh_download_mb_per_s`", "45.2", "39.1"] in figures
    assert ["`bytes`", "7,923,046", ""] in figures
    assert ["`agent_sha256`", "", "97c1ecda69f5…"] in figures
    assert ["**`streams/large-stream`**", "", ""] in figures
    assert f"title='{SHA}'>97c1ecda69f5…</td>" in page
    # A case that ran shows how long it took (in the Markdown cell; in HTML also on hover); a skip does not.
    up_fresh = next(row for row in _md_table(markdown, "Cases") if row[0] == "`up-fresh`")
    assert up_fresh[1] == "pass · 4.4 s" and up_fresh[3] == "pass · 2.5 s"
    assert re.fullmatch(r"not runnable \[\d+\]", up_fresh[2])
    assert "<td class='pass' title='took 4.4 s'>pass<span class='dur'>4.4 s</span></td>" in page
    assert "title='did not run'>not runnable<sup>" in page
    # A failure's hover says why, next to how long it took.
    assert "<td class='fail' title='took 2.5 s; AssertionError: &lt;script&gt;alert(1)" in page


def test_verdict_comes_first() -> None:
    markdown, page = _markdown(), _html()
    headings = re.findall(r"^## (.+)$", markdown, re.M)
    assert headings[0] == "Cutover verdict" and headings.index("Cases") == 1
    assert markdown.index("- **NO** docker: external-docker may NOT replace") < markdown.index("Results: ")
    assert markdown.index("- **UNDECIDED** microsandbox: cutover cannot be decided") < markdown.index("Results: ")
    parsed = _parse(page)
    body = [tag for tag, _ in parsed.tags if tag in ("h1", "div", "p", "h2", "table")]
    assert body[:4] == ["h1", "div", "div", "p"]
    assert [attrs.get("class") for tag, attrs in parsed.tags if tag == "div"] == ["verdict no", "verdict undecided"]


def test_html_is_well_formed_self_contained_and_escaped() -> None:
    page = _html()
    parsed = _parse(page)
    tags = [tag for tag, _ in parsed.tags]
    assert "script" not in tags and "img" not in tags and "link" not in tags
    # No asset from elsewhere: the only links are to the page's own footnotes.
    hrefs = [attrs.get("href") or "" for tag, attrs in parsed.tags if tag == "a"]
    assert hrefs and all(href.startswith("#note-") for href in hrefs)
    assert not any(attrs.get("src") for _, attrs in parsed.tags)
    # The hostile case title and reason arrive as text, not markup.
    texts = [text for _, text in parsed.data]
    assert "<script>alert(1)</script> & | `x` *y*" in texts
    assert any(text.startswith("AssertionError: <script>alert(1)</script>") for text in texts)
    assert "<script>" not in page and "&lt;script&gt;" in page
    # Every case row has one cell per provider plus the case; suite rows span the table.
    width = len(CATALOGUE_PROVIDER_IDS) + 1
    assert {len(row) for row in _cases_rows(page) if len(row) != 1} == {width}
    assert page.count(f"colspan='{width}'") == len(MANIFEST.suites)


def test_markdown_rows_have_one_column_count_and_no_raw_html() -> None:
    markdown = _markdown()
    for heading in ("Cases", "Figures"):
        section = markdown.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("|")]
        assert len({len(re.split(r"(?<!\\)\|", line)) for line in rows}) == 1, heading
    # The hostile reason's pipe is escaped, its markup is text; raw lines stay only inside the evidence fence.
    prose = _outside_fences(markdown)
    assert "<script" not in prose and "<b>" not in prose
    assert "AssertionError: &lt;script&gt;alert(1)&lt;/script&gt; &amp; \\| \\`x\\` \\*y\\*" in prose
    assert "```text\n  more lines\n  ```" in markdown
