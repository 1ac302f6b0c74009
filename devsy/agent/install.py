"""Making the agent usable in a workspace: deliver it, let it prepare itself, and remember where it is (note.py);
or, where the guest cannot run it, remember that the workspace's sessions are exec sessions."""

from __future__ import annotations

import dataclasses
import io
import json

from devsy.agent.artifact import resolve_artifact
from devsy.agent.delivery import DeliveryStrategy, StreamDelivery, checked_then, guest_agent_path
from devsy.agent.delivery_fault import DeliveryTrace
from devsy.agent.errors import AgentUnsupported
from devsy.agent.host_view import host_stamps, instance_identity, still_in_place
from devsy.agent.note import AgentNote, Sessions, note_path, read_note, write_note
from devsy.driver.base import CancelToken, ContainerDetails, Driver, ExecRequest
from devsy.progress import Progress
from devsy.workspace.ledger import AttemptLedger
from devsy.workspace.paths import WorkspacePaths

# How the host starts the agent: a missing file is exit 199, so the caller can deliver it and retry. python3 -E: the
# workspace's PYTHON* variables (PYTHONPATH, ...) must not change what the agent imports; -S: it needs nothing from
# site-packages, and skipping `site` shortens every start. Python rewrites LC_CTYPE in its own environment where the
# locale is C (PEP 538), so the launcher keeps the guest's: "" when it had none, else "set:" and its value, which
# `devsy exec` commands then get (devsy/agent/guest/process.py).
EXIT_AGENT_MISSING = 199
_LAUNCH = ('a=$1; shift; [ -f "$a" ] || exit 199; export DEVSY_AGENT_LC_CTYPE="${LC_CTYPE+set:$LC_CTYPE}"; '
           'exec python3 -E -S "$a" "$@"')


def launch_argv(guest_path: str, *args: str) -> list[str]:
    """The exec argv that runs the agent at `guest_path` with `args`."""
    return ["/bin/sh", "-c", _LAUNCH, "devsy-agent", guest_path, *args]


def install_agent(driver: Driver, workspace_id: str, paths: WorkspacePaths, progress: Progress, *,
                  ledger: AttemptLedger | None = None, strategy: DeliveryStrategy | None = None,
                  cancel: CancelToken | None = None, instance: ContainerDetails | None = None) -> AgentNote:
    """Deliver (unless present) and set up the agent; raises AgentUnsupported when the guest cannot run it.
    `instance` (the workspace's, as found): noted with the file's look from the host, for the next up (host_view.py).
    Where an earlier up set the agent up in this very instance, its architecture is known and the presence check
    and the setup are one round trip; anything amiss there (absent, changed, no python3) takes the full path."""
    cancel = cancel or CancelToken()
    earlier = _noted_in(paths, instance)
    arch = earlier.arch if earlier is not None else driver.target_architecture(workspace_id)
    artifact = resolve_artifact(arch)
    with progress.step(f"delivering the agent into workspace {workspace_id}"):
        guest_path = guest_agent_path(artifact.sha256)
        report = None
        if earlier is not None and earlier.sha256 == artifact.sha256:
            report = _setup_if_present(driver, workspace_id, guest_path, artifact.sha256, cancel)
        if report is None:
            guest_path = (strategy or StreamDelivery()).deliver(driver, workspace_id, artifact, cancel).guest_path
            report = _setup(driver, workspace_id, guest_path, cancel)
    note = AgentNote(guest_path=guest_path, sha256=artifact.sha256, python=str(report.get("python", "")), arch=arch)
    guest_stamps = report.get("stamps")
    if instance is not None and isinstance(guest_stamps, dict) and guest_path in guest_stamps:
        note = dataclasses.replace(note, instance=instance_identity(instance),
                                   stamps=host_stamps(instance, {str(k): str(v) for k, v in guest_stamps.items()}))
    _save_note(paths, note, ledger)
    return note


def _noted_in(paths: WorkspacePaths, instance: ContainerDetails | None) -> AgentNote | None:
    """The note of an agent an earlier up set up in this very instance, where only a look in the guest can tell
    whether it is still in place (None: none, another instance, or the host's view already saw a change)."""
    if instance is None:
        return None
    note = read_note(paths)
    if note is None or note.exec_sessions or not note.arch or note.instance != instance_identity(instance):
        return None
    return None if note.guest_path in note.stamps else note


def agent_in_place(paths: WorkspacePaths, instance: ContainerDetails) -> bool:
    """Whether the agent an earlier up set up in this very instance is still there unchanged, and is the one this
    devsy would deliver (seen from the host, no round trip; see host_view.py)."""
    note = read_note(paths)
    if note is None or note.exec_sessions or not note.arch or note.guest_path not in note.stamps:
        return False
    if note.instance != instance_identity(instance) or not still_in_place(instance, note.stamps):
        return False
    return resolve_artifact(note.arch).sha256 == note.sha256


def _save_note(paths: WorkspacePaths, note: AgentNote, ledger: AttemptLedger | None) -> None:
    existed = note_path(paths).exists()
    write_note(paths, note)
    if ledger is not None and not existed:
        ledger.add("remove the agent note", lambda: note_path(paths).unlink(missing_ok=True))


def install_agent_or_exec_sessions(driver: Driver, workspace_id: str, paths: WorkspacePaths, progress: Progress, *,
                                   ledger: AttemptLedger | None = None, cancel: CancelToken | None = None,
                                   instance: ContainerDetails | None = None) -> AgentNote:
    """The agent where the guest can run it; else a note that the workspace's sessions are exec sessions, which
    need nothing in the guest but a shell (said once, as a notice: every devsy command still works)."""
    try:
        return install_agent(driver, workspace_id, paths, progress, ledger=ledger, cancel=cancel, instance=instance)
    except AgentUnsupported as exc:
        from devsy.ssh.exec_terminal import find_terminal_helper

        terminal = find_terminal_helper(driver, workspace_id, cancel or CancelToken())
        note = AgentNote(guest_path="", sha256="", sessions=Sessions.EXEC, why=exc.message, terminal=terminal)
        _save_note(paths, note, ledger)
        how = f"with a terminal through {terminal}" if terminal else \
            "without a terminal (neither script nor busybox telnetd)"
        progress.info(f"workspace {workspace_id} cannot run devsy's agent ({exc.message}): its SSH sessions are "
                      f"served from the host, one exec each, {how}")
        return note


def install_agent_for_up(driver: Driver, workspace_id: str, paths: WorkspacePaths, progress: Progress,
                         ledger: AttemptLedger, instance: ContainerDetails) -> None:
    """`devsy up`'s step: nothing when the agent is provably in place; a guest that cannot run the agent (no
    python3 >= 3.9) gets exec sessions instead."""
    if agent_in_place(paths, instance):
        return
    install_agent_or_exec_sessions(driver, workspace_id, paths, progress, ledger=ledger, instance=instance)


def _setup(driver: Driver, workspace_id: str, guest_path: str, cancel: CancelToken) -> dict:
    """Run `agent setup` once: unpacks its libraries and makes its host key now rather than in the first ssh; its
    report (python tag, stamps: see host_view.py), {} if it printed none this devsy can read."""
    code, out, message = _run_setup(driver, workspace_id, launch_argv(guest_path, "setup"), cancel)
    if code == 127:
        raise AgentUnsupported("the workspace has no python3", hint="add python3 (>= 3.9) to the image")
    if code != 0:
        raise AgentUnsupported(f"the agent cannot start in the workspace (exit {code}): {message}",
                               hint="the agent needs python3 >= 3.9 on glibc x86_64/aarch64 in the image")
    return _report(out)


def _setup_if_present(driver: Driver, workspace_id: str, guest_path: str, sha256: str,
                      cancel: CancelToken) -> dict | None:
    """`agent setup` in the same exec as the check that the agent at `guest_path` is the one with `sha256`: its
    report, or None whenever that exec did not succeed (then deliver() and _setup() say why, each in its own)."""
    code, out, _ = _run_setup(driver, workspace_id, checked_then(guest_path, sha256, _LAUNCH, guest_path, "setup"),
                              cancel)
    if code != 0:
        return None
    DeliveryTrace.from_env().event("present", guest_path=guest_path, sha256=sha256)
    return _report(out)


def _run_setup(driver: Driver, workspace_id: str, argv: list[str], cancel: CancelToken) -> tuple[int, bytes, str]:
    out, err = io.BytesIO(), io.BytesIO()
    result = driver.exec(workspace_id, ExecRequest(argv=argv, stdout=out, stderr=err, user="0", cancel=cancel))
    return result.exit_code, out.getvalue(), err.getvalue().decode("utf-8", "replace").strip()[-500:]


def _report(out: bytes) -> dict:
    try:
        report = json.loads(out)
    except ValueError:
        return {}
    return report if isinstance(report, dict) else {}
