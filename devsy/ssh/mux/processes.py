"""Finding SSH masters by the devsy home they serve, for cleanup tools (the harness sweeper, test teardown): the
master's command line names its home and workspace (see mux/master.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import psutil

from devsy import process_tree

MASTER_MODULE = "devsy.ssh.mux.master"
# What masters started before the module moved to devsy/ssh/mux/ run as: they idle up to DEVSY_SSH_PERSIST_S after
# an upgrade, and `devsy delete` and the sweeper must still find them.
_FORMER_MASTER_MODULES = ("devsy.ssh.mux_master",)
_STOP_WAIT_S = 10.0


def masters_under(root: Path) -> list[tuple[psutil.Process, str]]:
    """(process, workspace id) of each master whose --home is `root` or below it."""
    root_text = os.path.realpath(root)
    found = []
    for process in psutil.process_iter(["cmdline"]):
        argv = process.info["cmdline"] or []
        is_master = any(module in argv for module in (MASTER_MODULE, *_FORMER_MASTER_MODULES))
        if not is_master or "--home" not in argv or "--workspace" not in argv:
            continue
        with contextlib.suppress(IndexError):
            home = os.path.realpath(argv[argv.index("--home") + 1])
            if home == root_text or home.startswith(root_text + os.sep):
                found.append((process, argv[argv.index("--workspace") + 1]))
    return found


def stop_masters_under(root: Path, workspaces: Callable[[str], bool] = lambda _: True) -> list[str]:
    """Stop (SIGTERM, then SIGKILL after a bound) every master under `root` serving one of `workspaces`; returns
    what was stopped."""
    masters = [(process, ws) for process, ws in masters_under(root) if workspaces(ws)]
    # psutil's is_running compares the create time it saw: the pinned pid is still the master we found.
    pinned = [found for process, _ in masters if (found := process_tree.pin(process.pid, process.is_running))]
    try:
        # TERM: it closes its connections; each agent then exits.
        process_tree.stop(pinned, group=False, grace=_STOP_WAIT_S, kill_wait=_STOP_WAIT_S)
    finally:
        for found in pinned:
            found.close()
    # Exited is not yet gone: callers look for masters in the process table, where one stays until its parent (not
    # us) reaps it.
    psutil.wait_procs([process for process, _ in masters], timeout=_STOP_WAIT_S)
    return [f"ssh master of {workspace} (pid {process.pid})" for process, workspace in masters]
