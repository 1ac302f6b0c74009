"""`python -m harness merge OUT REPORT_DIR...`: one report, parity table and verdict from the reports of CI shards.

The shards must be parts of one run of one catalogue: the same manifest (digest), commit and devsy version, no
result cell (case id + provider) claimed by two of them, and together every suite of the manifest. Any of those
not holding is refused (exit 2) with the reports that break it; `python -m harness validate OUT` then judges the
union exactly as it judges one full run.

Each shard's diagnostics folder is copied into OUT (CI uploads only OUT) under diagnostics/<n>-<shard folder name>
(the position keeps apart two shards downloaded to folders of one name), and every path the records give for it
is rewritten to the copy. OUT is written in a staging folder next to it and moved in only when complete, so a
refused or failed merge leaves OUT as it was.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from harness import parity_render
from harness.catalogue import Manifest, ManifestError, load_manifest
from harness.parity import build_parity, outcome_counts
from harness.provenance import UNKNOWN, Provenance, manifest_digest
from harness.records import CaseRecord
from harness.report import OWNED_REPORT_FILES, Report, ReportError, ReportSource, load_report, write_report_json

JUNIT_FILE = "junit.xml"
DIAGNOSTICS = "diagnostics"
_SHOWN = 5  # cells named per overlap before "and N more"


class MergeWriteFailed(Exception):
    """OUT could not be written (a shard's diagnostics could not be copied, the disk is full, ...)."""


class MergeRefused(ValueError):
    """The reports are not parts of one run; `problems` says each way, naming the reports."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Part:
    """One shard report and where it was read from."""

    directory: Path
    report: Report

    @property
    def name(self) -> str:
        return str(self.directory)

    def suites(self, manifest: Manifest) -> list[str]:
        return list(self.report.suites) if self.report.suites is not None else manifest.suite_names()

    def cells(self, manifest: Manifest) -> set[str]:
        """The result ids this shard is responsible for (its suites x requested providers), and those it has."""
        claimed = set(manifest.expected_results(self.report.requested, tuple(self.suites(manifest))))
        return claimed | set(self.report.results)


def _same(parts: list[Part], what: str, value_of: Callable[[Part], str]) -> list[str]:
    groups: dict[str, list[str]] = {}
    for part in parts:
        groups.setdefault(value_of(part), []).append(part.name)
    if len(groups) <= 1:
        return []
    listed = "; ".join(f"{value} in {', '.join(names)}" for value, names in sorted(groups.items()))
    return [f"the reports are of different {what}: {listed}"]


def refusals(parts: list[Part], manifest: Manifest) -> list[str]:
    """Every reason these reports cannot be merged into one run of `manifest` (empty = they can)."""
    unrecorded = [part.name for part in parts if part.report.provenance is None]
    if unrecorded:
        return [f"{', '.join(unrecorded)}: no provenance recorded (a report from before format 2); rerun the shard "
                "with this harness"]
    prov: dict[str, Provenance] = {part.name: part.report.provenance for part in parts}  # type: ignore[misc]
    problems = _same(parts, "manifests (digests)", lambda p: prov[p.name].manifest_digest)
    problems += _same(parts, "commits", lambda p: prov[p.name].commit)
    problems += _same(parts, "devsy versions", lambda p: prov[p.name].devsy_version)
    here = manifest_digest(manifest)
    other = sorted(p.name for p in parts if prov[p.name].manifest_digest != here)
    if other and not problems:
        problems.append(f"{', '.join(other)}: made with a manifest other than {manifest.source} here ({here}); merge "
                        "with the checkout that ran the shards")
    owner: dict[str, str] = {}
    overlaps: dict[tuple[str, str], list[str]] = {}
    for part in parts:
        for cell in sorted(part.cells(manifest)):
            if cell in owner:
                overlaps.setdefault((owner[cell], part.name), []).append(cell)
            else:
                owner[cell] = part.name
    for (first, second), cells in sorted(overlaps.items()):
        more = f" and {len(cells) - _SHOWN} more" if len(cells) > _SHOWN else ""
        problems.append(f"{first} and {second} overlap: both cover {', '.join(cells[:_SHOWN])}{more}")
    covered = {suite for part in parts for suite in part.suites(manifest)}
    missing = [suite for suite in manifest.suite_names() if suite not in covered]
    if missing:
        problems.append(f"the union of {', '.join(p.name for p in parts)} misses manifest suite(s) "
                        f"{', '.join(missing)} (no shard ran them)")
    return problems


def merge(parts: list[Part], manifest: Manifest, command: list[str]) -> Report:
    """One report of the whole catalogue from shard reports; raises MergeRefused when they are not one run."""
    if not parts:
        raise MergeRefused(["no report to merge"])
    problems = refusals(parts, manifest)
    if problems:
        raise MergeRefused(problems)
    reports = [part.report for part in parts]
    first: Provenance = reports[0].provenance  # type: ignore[assignment]
    run_ids = sorted(r.run_id for r in reports)
    merged = Report(
        run_id="merge-" + hashlib.sha256("+".join(run_ids).encode()).hexdigest()[:12],
        manifest=reports[0].manifest,
        requested=sorted({p for r in reports for p in r.requested}),
        required=sorted({p for r in reports for p in r.required}),
        narrowed=any(r.narrowed for r in reports),
        narrowed_by=[f"{part.name}: {why}" for part in parts for why in part.report.narrowed_by],
        suites=None,
        # Each shard probed its own runner: keep every probe, named by the report it came from (its whole path:
        # two shard folders may share a base name).
        probes={f"{backend} ({part.name})": probe for part in parts
                for backend, probe in sorted(part.report.probes.items())},
        results={rid: record for r in reports for rid, record in r.results.items()},
        started_at=min((r.started_at for r in reports if r.started_at), default=""),
        finished_at=max((r.finished_at for r in reports if r.finished_at), default=""),
        # The shards run side by side: the union took as long as its slowest shard.
        wall_seconds=max(r.wall_seconds for r in reports),
        exit_status=next((r.exit_status for r in reports if r.exit_status), reports[0].exit_status),
        command=command,
        provenance=Provenance(first.manifest_digest, first.commit, first.commit_note, first.devsy_version, None),
        sources=[ReportSource(part.name, r.run_id, r.suites, list(r.requested), r.exit_status, r.wall_seconds,
                              r.provenance.host if r.provenance is not None else None)
                 for part, r in zip(parts, reports, strict=True)],
    )
    return merged


def merge_junit(parts: list[Part], out: Path) -> Path | None:
    """One junit.xml holding every shard's test suites; None when a shard has none (then none is written)."""
    if not all((part.directory / JUNIT_FILE).is_file() for part in parts):
        return None
    root = ET.Element("testsuites")
    for part in parts:
        tree = ET.parse(part.directory / JUNIT_FILE).getroot()
        suites = [tree] if tree.tag == "testsuite" else list(tree)
        for suite in suites:
            suite.set("name", f"{suite.get('name', 'pytest')} ({part.directory.name})")
            root.append(suite)
    path = out / JUNIT_FILE
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


@dataclass(frozen=True)
class Relocation:
    """The diagnostics the merged report points at: (shard folder, its place in OUT) pairs, and the recorded
    folders a shard report does not hold (kept as recorded, and said)."""

    copies: list[tuple[Path, Path]]
    missing: list[str]


def relocate_diagnostics(parts: list[Part], report: Report, out: Path) -> Relocation:
    """Point every diagnostics folder the merged `report` records at its copy under `out` (an absolute path)."""
    copies: list[tuple[Path, Path]] = []
    missing: list[str] = []
    for index, part in enumerate(parts, start=1):
        source, target = part.directory / DIAGNOSTICS, out / DIAGNOSTICS / f"{index}-{part.directory.name}"
        if source.is_dir():
            copies.append((source, target))
        for rid in sorted(part.report.results):
            record = report.results[rid]
            if not record.diagnostics:
                continue
            # Recorded as <the shard's report folder where it ran>/diagnostics/<name>: that folder may be gone
            # (CI downloads a shard elsewhere); <name> is what the shard report still holds.
            name = Path(record.diagnostics).name
            if (source / name).is_dir():
                report.results[rid] = _repointed(record, record.diagnostics, str(target / name))
            else:
                missing.append(f"{rid}: {record.diagnostics}")
    return Relocation(copies, missing)


def _repointed(record: CaseRecord, old: str, new: str) -> CaseRecord:
    return replace(record, diagnostics=new, evidence=[line.replace(old, new) for line in record.evidence],
                   reason=record.reason.replace(old, new))


def write_merged(parts: list[Part], manifest: Manifest, out: Path, command: list[str]) -> tuple[Report, Relocation]:
    """Merge and write OUT's report.json, parity.md/html, diagnostics/ and (when every shard has one) junit.xml."""
    report = merge(parts, manifest, command)  # a refusal raises before anything is written
    out = out.resolve()
    relocation = relocate_diagnostics(parts, report, out)
    if out.exists() and not out.is_dir():
        raise MergeWriteFailed(f"cannot write the merged report: {out} exists and is not a directory; "
                               "choose another OUT")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.merging-", dir=out.parent))  # same filesystem: renames
    except OSError as exc:
        raise MergeWriteFailed(f"cannot write the merged report next to {out}: {exc}; {out} is unchanged") from exc
    try:
        try:
            for source, target in relocation.copies:
                shutil.copytree(source, staging / target.relative_to(out), symlinks=True)
            write_report_json(report, staging)
            parity_render.write_parity(build_parity(report, manifest), report, staging, manifest)
            merge_junit(parts, staging)
        except OSError as exc:
            raise MergeWriteFailed(f"cannot write the merged report: {exc}; {out} is unchanged") from exc
        try:
            _move_into(staging, out)
        except OSError as exc:
            raise MergeWriteFailed(f"replacing the report in {out} failed part way: {exc}; rerun the merge") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report, relocation


def _move_into(staging: Path, out: Path) -> None:
    """Replace OUT's owned files and diagnostics with the staged ones; anything else in OUT stays."""
    out.mkdir(exist_ok=True)
    for name in OWNED_REPORT_FILES:
        (out / name).unlink(missing_ok=True)
    if (out / DIAGNOSTICS).exists():
        shutil.rmtree(out / DIAGNOSTICS)
    for entry in sorted(staging.iterdir()):
        entry.rename(out / entry.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness merge", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the directory to write the merged report to")
    parser.add_argument("reports", type=Path, nargs="+", help="shard report directories (or their report.json)")
    parser.add_argument("--manifest", default=None, help="manifest module or .py path (default: the reports')")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    inside = [str(path) for path in args.reports if path.resolve() in (out, out / "report.json")]
    if inside:
        print(f"merge: OUT {args.out} is also a report to merge ({', '.join(inside)}); choose another directory")
        return 2
    try:
        # A report may be named by its folder or its report.json; the folder is where junit.xml is too.
        parts = [Part(path.parent if path.is_file() else path, load_report(path)) for path in args.reports]
        sources = sorted({part.report.manifest for part in parts})
        manifest = load_manifest(args.manifest or (sources[0] if len(sources) == 1 else "scenarios.manifest"))
        report, relocation = write_merged(parts, manifest, args.out,
                                          ["python", "-m", "harness", "merge", *map(str, argv or [])])
    except (ReportError, ManifestError, MergeWriteFailed) as exc:
        print(f"merge: {exc}")
        return 2
    except MergeRefused as exc:
        print(f"merge: refused: {len(exc.problems)} problem(s) with {', '.join(map(str, args.reports))}:")
        for problem in exc.problems:
            print(f"  - {problem}")
        return 2
    prov = report.provenance
    assert prov is not None
    commit = prov.commit if prov.commit != UNKNOWN else f"unknown ({prov.commit_note})"
    print(f"merge: {args.out}: {len(parts)} report(s), {outcome_counts(report)}; commit {commit}; "
          f"devsy {prov.devsy_version}; manifest {prov.manifest_digest}")
    if relocation.missing:
        print(f"merge: {len(relocation.missing)} diagnostics folder(s) recorded by the shards are not in their "
              f"report folders (the records keep the recorded paths): {'; '.join(relocation.missing)}")
    for verdict in build_parity(report, manifest).verdicts:
        print(f"verdict {verdict.sentence()}")
    print(f"gate with: python -m harness validate {args.out} --require P1,P2")
    return 0
