"""Starting a run: the first process of a session to need the run's directories sweeps leftovers of the same run
id (a previous crashed or kept run), then creates them. Later processes of the same session (xdist workers) see
the session token and skip the sweep.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from filelock import FileLock

from harness.ownership import RunPaths
from harness.sweep import SweepReport, sweep_run

LOCK_TIMEOUT = 300


def ensure_started(paths: RunPaths, session_token: str) -> SweepReport | None:
    """Create the run's directories once per session; return the start sweep's report when this call swept."""
    paths.root.joinpath("runs").mkdir(parents=True, exist_ok=True)
    with FileLock(str(paths.lock_file), timeout=LOCK_TIMEOUT):
        if _session_token(paths.session_file) == session_token:
            return None
        report = sweep_run(paths.run_id, paths.root, remove_lock=False)
        for directory in (paths.run_dir, paths.devsy_home, paths.probes_dir):
            directory.mkdir(parents=True, exist_ok=True)
        paths.session_file.write_text(json.dumps({"session": session_token, "started": time.time()}))
        return report


def is_started(paths: RunPaths) -> bool:
    return paths.session_file.exists()


def _session_token(path: Path) -> str | None:
    try:
        return str(json.loads(path.read_text()).get("session"))
    except (OSError, ValueError):
        return None
