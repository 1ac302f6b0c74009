"""What a failed case leaves behind for whoever reproduces it: REPORT/diagnostics/<result>/."""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.case_context import CaseContext
from harness.probes import ProbeResult


def diagnostics_dir(report_dir: Path, result_id: str) -> Path:
    return report_dir / "diagnostics" / re.sub(r"[^A-Za-z0-9_.-]+", "_", result_id).strip("_")


def save_diagnostics(ctx: CaseContext, failure: str, probe: ProbeResult | None) -> Path:
    """Write the commands the case ran, its instances' logs and the probe evidence; return the folder."""
    folder = diagnostics_dir(ctx.settings.report_dir, ctx.result_id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "failure.txt").write_text(f"{ctx.result_id} ({ctx.nodeid})\n\n{failure}\n")
    (folder / "commands.txt").write_text(ctx.log.render() + "\n")
    (folder / "commands.json").write_text(json.dumps([r.to_dict() for r in ctx.log.records], indent=2))
    (folder / "probe.txt").write_text((probe.evidence() if probe else "(no probe result recorded)") + "\n")
    (folder / "instance-logs.txt").write_text(_instance_logs(ctx))
    (folder / "reproduce.txt").write_text(_reproduce(ctx))
    ctx.diagnostics = folder
    return folder


def _instance_logs(ctx: CaseContext) -> str:
    parts: list[str] = []
    handle = ctx.diagnostics_handle()
    for workspace_id in ctx.devsy.created:
        try:
            completed = handle.logs(workspace_id)
            parts.append(f"=== devsy logs {workspace_id} (exit {completed.exit_code}) ===")
            parts.append(completed.stdout.decode("utf-8", "replace"))
            if completed.stderr:
                parts.append(f"--- stderr ---\n{completed.stderr.decode('utf-8', 'replace')}")
        except Exception as exc:  # diagnostics are best effort, but say why they are missing
            parts.append(f"=== devsy logs {workspace_id}: not collected: {type(exc).__name__}: {exc} ===")
        try:
            parts.append(f"=== backend view ({ctx.provider.backend}) ===")
            for instance in ctx.backend.instances(workspace_id):
                parts.append(f"instance {instance.name} id={instance.id[:12]} status={instance.status} "
                             f"created={instance.created_at}")
            parts.append(ctx.backend.instance_logs(workspace_id))
        except Exception as exc:
            parts.append(f"backend view not collected: {type(exc).__name__}: {exc}")
    if not ctx.devsy.created:
        parts.append("(the case created no workspace)")
    return "\n".join(parts) + "\n"


def _reproduce(ctx: CaseContext) -> str:
    cli = " ".join(ctx.settings.cli)
    return (
        f"Rerun only this case:\n"
        f"  pytest scenarios -p no:cacheprovider --devsy-case '{ctx.result_id}' --devsy-cli {cli}\n"
        f"  (or: pytest scenarios -k '{ctx.case_id}' --devsy-providers {ctx.provider.name})\n"
        f"Keep the instance for inspection: add --devsy-keep-on-failure\n"
        f"Run id: {ctx.paths.run_id}; reuse it with --devsy-run-id {ctx.paths.run_id}\n"
    )
