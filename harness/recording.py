"""Turn one item's phase reports and case context into its CaseRecord."""

from __future__ import annotations

import pytest

from harness.case_context import CaseContext
from harness.catalogue import result_id
from harness.records import ERROR, FAIL, PASS, SKIP, CaseRecord


def failure_text(report: pytest.TestReport) -> str:
    """The crash message of a failed phase (the assertion or error line), else its last lines."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None) if crash is not None else None
    if message:
        return str(message)
    text = report.longreprtext.strip()
    return "\n".join(text.splitlines()[-15:])


def skip_text(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return report.longreprtext


def build_record(
    nodeid: str,
    case_id: str,
    provider: str,
    phases: dict[str, pytest.TestReport],
    ctx: CaseContext | None,
) -> CaseRecord:
    setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
    if setup is not None and setup.skipped:
        outcome, reason = SKIP, skip_text(setup)
    elif setup is not None and setup.failed:
        outcome, reason = ERROR, f"setup: {failure_text(setup)}"
    elif call is not None and call.failed:
        outcome, reason = FAIL, failure_text(call)
    elif teardown is not None and teardown.failed:
        outcome, reason = ERROR, failure_text(teardown)
    elif call is not None and call.skipped:
        outcome, reason = SKIP, skip_text(call)
    elif call is not None and call.passed:
        outcome, reason = PASS, ""
    else:
        outcome, reason = ERROR, "the case did not finish (interrupted)"
    evidence: list[str] = []
    record = CaseRecord(
        result_id=result_id(case_id, provider),
        case_id=case_id,
        provider=provider,
        nodeid=nodeid,
        outcome=outcome,
        duration=round(sum(rep.duration for rep in phases.values()), 3),
        reason=reason,
        evidence=evidence,
    )
    if ctx is not None:
        record.cleanup = [result.to_dict() for result in ctx.cleanup.results]
        record.cleanup_errors = ctx.cleanup.errors()
        record.figures = dict(ctx.figures)
        record.kept = list(ctx.kept)
        record.workspaces = ctx.created_workspaces()
        if ctx.diagnostics is not None:
            record.diagnostics = str(ctx.diagnostics)
            evidence.append(f"diagnostics: {ctx.diagnostics}")
        evidence += [f"kept; enter with: {command}" for command in ctx.kept]
    return record
