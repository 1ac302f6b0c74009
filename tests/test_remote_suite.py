"""The remote-agent catalogue suite run through the harness as CI runs it: it passes, the validator requiring
remote-docker accepts its report, the figures are there, and no container, volume or process of the run survives."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import psutil

from harness.backends import LABEL_WORKSPACE
from harness.ownership import HARNESS_RUN_LABEL, Ownership

REPO = Path(__file__).resolve().parent.parent
SUITE_TIMEOUT_S = 1500


def test_the_suite_passes_gated_and_leaves_nothing(tmp_path, docker_client):
    run_id = f"remote-suite-{secrets.token_hex(4)}"
    report = tmp_path / "report"
    env = {**os.environ, "DEVSY_HARNESS_ROOT": str(tmp_path / "harness")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "-q",
                           "--devsy-suite", "remote-agent", "--devsy-providers", "remote-docker",
                           "--devsy-require", "remote-docker", "--devsy-run-id", run_id, "--devsy-report", str(report)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=SUITE_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    gate = subprocess.run([sys.executable, "-m", "harness", "validate", str(report), "--require", "remote-docker"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert gate.returncode == 0 and ": OK (3 pass," in gate.stdout, gate.stdout

    results = json.loads((report / "report.json").read_text())["results"]
    once = results["remote-agent/runtime-download-once[remote-docker]"]["figures"]
    assert (once["runtime_requests"], once["runtime_requests_after_restarts"], once["agent_requests"]) == (1, 1, 1)
    reuse = results["remote-agent/runtime-404-reuse[remote-docker]"]["figures"]
    assert reuse["copy_inode_before"] == reuse["copy_inode_after"] and reuse["copy_mode_after"] == "755"
    mismatch = results["remote-agent/checksum-mismatch[remote-docker]"]["figures"]
    assert mismatch["served_sha256"] != mismatch["pinned_sha256"] and mismatch["tampered_requests"] == 1

    prefix = Ownership(run_id).workspace_prefix

    def owned(labels: dict[str, str]) -> bool:
        return labels.get(HARNESS_RUN_LABEL) == run_id or labels.get(LABEL_WORKSPACE, "").startswith(prefix)

    assert [c.name for c in docker_client.containers.list(all=True) if owned(c.labels or {})] == []
    assert [v.name for v in docker_client.volumes.list() if owned(v.attrs.get("Labels") or {})] == []
    survivors = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])
                 if prefix in " ".join(p.info["cmdline"] or [])]
    assert survivors == []
