"""The report validator: may this run gate a cutover? Lists every problem, exits non-zero when there is one.

Usage: python -m harness validate REPORT_DIR [--require P1,P2] [--manifest scenarios.manifest]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.catalogue import Manifest, ManifestError, load_manifest, split_result_id
from harness.provenance import manifest_digest
from harness.providers import ProviderSelectionError, parse_required
from harness.records import ERROR, FAIL, PASS
from harness.report import Report, ReportError, load_report


def validate(report: Report, manifest: Manifest, require: list[str]) -> list[str]:
    """Every reason this report cannot gate a cutover for the `require`d providers (empty = it can)."""
    problems: list[str] = []
    shard = report.shard
    expected_providers = sorted(set(report.requested) | set(require))
    expected = manifest.expected_results(expected_providers, shard)
    ran = [r for r in report.results.values() if r.outcome in (PASS, FAIL, ERROR)]
    # A shard with nothing to run for these providers (an empty catch-all, or suites that apply to other providers
    # only) is complete when empty; every other run must have run something.
    if not ran and (shard is None or expected):
        problems.append("zero cases ran: the report has no passed or failed case")
    if report.provenance is not None and report.provenance.manifest_digest != manifest_digest(manifest):
        problems.append(f"the report was made with another manifest ({report.provenance.manifest_digest}) than "
                        f"{manifest.source} ({manifest_digest(manifest)}); validate with the checkout that ran it")
    if report.narrowed:
        problems.append(
            f"the run was narrowed ({', '.join(report.narrowed_by) or 'selection'}); rerun the whole catalogue to gate"
        )
    for rid in sorted(report.results):
        try:
            case_id, provider = split_result_id(rid)
        except ValueError as exc:
            problems.append(f"result {rid!r} is not in the manifest: {exc}")
            continue
        if manifest.case(case_id) is None:
            problems.append(f"result {rid} is not in the manifest ({manifest.source} has no case {case_id})")
        elif not manifest.applies(case_id, provider):
            problems.append(f"result {rid} is not in the manifest (the case does not apply to {provider})")
        elif shard is not None and case_id.partition("/")[0] not in shard:
            problems.append(f"result {rid} is outside the run's shard (suites: {', '.join(shard) or 'none'})")
    if shard is not None:
        unknown = [name for name in shard if name not in manifest.suite_names()]
        problems += [f"the run's shard names suite {name}, which {manifest.source} does not have" for name in unknown]
    for rid in expected:
        if rid not in report.results:
            problems.append(f"manifest case {rid} has no result")
    return problems + required_problems(report, manifest, require, include_missing=False)


def required_problems(
    report: Report, manifest: Manifest, require: list[str], include_missing: bool = True
) -> list[str]:
    """Every case of a required provider that did not pass (skipped, failed, errored or missing).

    A simulated column (`<kind>-<backend>-sim`) may be required on its own: then every case its stand-in can show
    must pass; the cases the manifest declares out of the stand-in's reach (`simulator=False`) must still have a
    result (validate), reported not runnable on the simulator. Requiring it never requires, or satisfies, the real
    `<kind>-<backend>` column: their result ids differ."""
    problems: list[str] = []
    for provider in require:
        for rid in manifest.expected_results([provider], report.shard):
            if manifest.simulator_limit(split_result_id(rid)[0], provider) is not None:
                continue
            record = report.results.get(rid)
            if record is None:
                if include_missing:
                    problems.append(f"required provider {provider}: {rid} is missing (no result)")
            elif record.outcome != PASS:
                reason = record.reason.strip().splitlines()[0] if record.reason.strip() else "no reason recorded"
                problems.append(f"required provider {provider}: {rid} is {record.outcome}: {reason}")
        if not manifest.expected_results([provider]):
            problems.append(f"required provider {provider}: no manifest case applies to it")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness validate", description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="the --devsy-report directory (or its report.json)")
    parser.add_argument("--require", default=None, help="providers that must pass fully (default: the run's own)")
    parser.add_argument("--manifest", default=None, help="manifest module or .py path (default: the run's)")
    args = parser.parse_args(argv)
    try:
        report = load_report(args.report)
        manifest = load_manifest(args.manifest or report.manifest or "scenarios.manifest")
        require = parse_required(args.require) if args.require is not None else sorted(report.required)
    except (ReportError, ManifestError, ProviderSelectionError) as exc:
        print(f"validate: {exc}")
        return 2
    problems = validate(report, manifest, require)
    counts = ", ".join(f"{n} {k}" for k, n in report.summary().items())
    if report.sources:
        counts += f"; merged from {len(report.sources)} report(s)"
    if report.shard is not None:
        counts += f"; shard: {', '.join(report.shard) or 'no suite (every suite has its own shard)'}"
    if problems:
        required = ", ".join(require) or "none"
        print(f"validate: {args.report}: {len(problems)} problem(s) ({counts}; required: {required}):")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print(f"validate: {args.report}: OK ({counts}; required: {', '.join(require) or 'none'}; run {report.run_id})")
    return 0
