"""Making the agent usable in a workspace: deliver it, let it prepare itself, and remember where it is.

The guest path is remembered in `<workspace dir>/agent.json` (devsy's own folder, removed with the workspace), so
`devsy ssh` starts the agent without building, hashing or checking anything first.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from devsy.agent.artifact import resolve_artifact
from devsy.agent.delivery import DeliveryStrategy, StreamDelivery
from devsy.agent.errors import AgentUnsupported
from devsy.driver.base import CancelToken, Driver, ExecRequest
from devsy.progress import Progress
from devsy.workspace.ledger import AttemptLedger
from devsy.workspace.paths import WorkspacePaths

NOTE_NAME = "agent.json"
# How the host starts the agent: a missing file is exit 199, so the caller can deliver it and retry. python3 -E: the
# workspace's PYTHON* variables (PYTHONPATH, ...) must not change what the agent imports; -S: it needs nothing from
# site-packages, and skipping `site` shortens every start.
EXIT_AGENT_MISSING = 199
_LAUNCH = 'a=$1; shift; [ -f "$a" ] || exit 199; exec python3 -E -S "$a" "$@"'


@dataclass(frozen=True)
class AgentNote:
    guest_path: str
    sha256: str
    python: str = ""


def launch_argv(guest_path: str, *args: str) -> list[str]:
    """The exec argv that runs the agent at `guest_path` with `args`."""
    return ["/bin/sh", "-c", _LAUNCH, "devsy-agent", guest_path, *args]


def note_path(paths: WorkspacePaths) -> Path:
    return paths.root / NOTE_NAME


def read_note(paths: WorkspacePaths) -> AgentNote | None:
    try:
        data = json.loads(note_path(paths).read_text())
        return AgentNote(guest_path=str(data["guest_path"]), sha256=str(data["sha256"]),
                         python=str(data.get("python", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # never written, or unreadable: the agent is simply delivered again


def _write_note(paths: WorkspacePaths, note: AgentNote) -> None:
    paths.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=paths.root, prefix=".agent.json.")
    with os.fdopen(fd, "w") as handle:
        json.dump(asdict(note), handle, sort_keys=True)
    os.replace(tmp, note_path(paths))


def install_agent(driver: Driver, workspace_id: str, paths: WorkspacePaths, progress: Progress, *,
                  ledger: AttemptLedger | None = None, strategy: DeliveryStrategy | None = None,
                  cancel: CancelToken | None = None) -> AgentNote:
    """Deliver (unless present) and set up the agent; raises AgentUnsupported when the guest cannot run it."""
    cancel = cancel or CancelToken()
    artifact = resolve_artifact(driver.target_architecture(workspace_id))
    with progress.step(f"delivering the agent into workspace {workspace_id}"):
        delivered = (strategy or StreamDelivery()).deliver(driver, workspace_id, artifact, cancel)
        python = _setup(driver, workspace_id, delivered.guest_path, cancel)
    note = AgentNote(guest_path=delivered.guest_path, sha256=delivered.sha256, python=python)
    existed = note_path(paths).exists()
    _write_note(paths, note)
    if ledger is not None and not existed:
        ledger.add("remove the agent note", lambda: note_path(paths).unlink(missing_ok=True))
    return note


def install_agent_for_up(driver: Driver, workspace_id: str, paths: WorkspacePaths, progress: Progress,
                         ledger: AttemptLedger) -> None:
    """`devsy up`'s step: a guest that cannot run the agent (no python3 >= 3.9) is a warning, not a failure,
    because everything but `devsy ssh` works without it."""
    try:
        install_agent(driver, workspace_id, paths, progress, ledger=ledger)
    except AgentUnsupported as exc:
        progress.info(f"warning: `devsy ssh` will not work in workspace {workspace_id}: {exc.message} "
                      f"({exc.hint})")


def _setup(driver: Driver, workspace_id: str, guest_path: str, cancel: CancelToken) -> str:
    """Run `agent setup` once: unpacks its libraries and makes its host key now rather than in the first ssh."""
    out, err = io.BytesIO(), io.BytesIO()
    result = driver.exec(workspace_id, ExecRequest(argv=launch_argv(guest_path, "setup"), stdout=out, stderr=err,
                                                   user="0", cancel=cancel))
    message = err.getvalue().decode("utf-8", "replace").strip()[-500:]
    if result.exit_code == 127:
        raise AgentUnsupported("the workspace has no python3", hint="add python3 (>= 3.9) to the image")
    if result.exit_code != 0:
        raise AgentUnsupported(f"the agent cannot start in the workspace (exit {result.exit_code}): {message}",
                               hint="the agent needs python3 >= 3.9 on glibc x86_64/aarch64 in the image")
    try:
        return str(json.loads(out.getvalue())["python"])
    except (ValueError, KeyError, TypeError):
        return ""
