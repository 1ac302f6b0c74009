"""The sweeper: removes only what harness runs own (backend objects by label, run directories, SSH blocks).

A run owns workspaces whose id starts with its prefix (harness.ownership), objects labelled with its run id, the
directory `<root>/runs/<run id>/`, and devsy SSH blocks for its workspaces in the user's default SSH config (only
there if devsy ever wrote outside the run's own config file).

A simulated column's stand-in (harness/providers.py SIMULATORS) keeps its state in the run dir: the sweeper removes
its sandboxes and volumes through the stand-in itself (in that state), then, unless a workspace is kept, whatever
Docker containers, volumes and image tags the stand-in left for that state (labelled `dev.devsy.msb-sim=true` and
the state's key; fixtures/msb_sim/docker.py), before the run dir goes.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from devsy.ssh.mux.processes import stop_masters_under
from harness import ssh_blocks
from harness.backends import LABEL_WORKSPACE, BackendUnavailable, LabelMatch, inspectable_backends, inspector_for
from harness.ownership import HARNESS_RUN_LABEL, Ownership, RunPaths, harness_root, is_owned_workspace
from harness.providers import SIM_SUFFIX, SIMULATORS

DEFAULT_SSH_CONFIG = Path.home() / ".ssh" / "config"


@dataclass
class SweepReport:
    run_ids: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"swept run(s): {', '.join(self.run_ids) or '(none found)'}"]
        lines += [f"  removed {item}" for item in self.removed]
        lines += [f"  kept {item}" for item in self.kept]
        lines += [f"  ERROR {item}" for item in self.errors]
        return "\n".join(lines)


def sweep_run(
    run_id: str,
    root: Path | None = None,
    keep_workspaces: frozenset[str] = frozenset(),
    remove_lock: bool = True,
) -> SweepReport:
    """Remove everything run `run_id` owns, except the workspaces in `keep_workspaces` (and then its directory).

    `remove_lock=False` when the caller holds the run's lock (the start-of-run sweep)."""
    ownership = Ownership(run_id)
    paths = RunPaths(run_id, root or harness_root())

    def owns_id(workspace_id: str) -> bool:
        return ownership.owns_workspace(workspace_id) and workspace_id not in keep_workspaces

    def owned(labels: dict[str, str]) -> bool:
        return ownership.owns_workspace(labels.get(LABEL_WORKSPACE, "")) or labels.get(HARNESS_RUN_LABEL) == run_id

    report = SweepReport(run_ids=[run_id])
    report.removed += stop_masters_under(paths.run_dir, lambda workspace_id: workspace_id not in keep_workspaces)
    def keep(labels: dict[str, str]) -> bool:
        return labels.get(LABEL_WORKSPACE, "") in keep_workspaces

    _sweep_backends(report, owned, keep)
    _sweep_simulators(report, [paths.run_dir], owned, keep, leftovers=not keep_workspaces)
    _sweep_ssh(report, owns_id)
    if keep_workspaces:
        report.kept += [f"workspace {ws}" for ws in sorted(keep_workspaces)] + [f"directory {paths.run_dir}"]
    else:
        _remove_path(report, paths.run_dir)
        if remove_lock:
            _remove_path(report, paths.lock_file)
    return report


def sweep_all_owned(root: Path | None = None) -> SweepReport:
    """Remove everything any harness run owns on this host."""
    base = root or harness_root()
    runs = base / "runs"
    run_ids = sorted(p.name for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
    report = SweepReport(run_ids=run_ids or ["(all owned)"])

    def owned(labels: dict[str, str]) -> bool:
        return is_owned_workspace(labels.get(LABEL_WORKSPACE, "")) or HARNESS_RUN_LABEL in labels

    report.removed += stop_masters_under(runs)  # devsy ssh's masters serving any run's home
    _sweep_backends(report, owned, lambda labels: False)
    run_dirs = [p for p in sorted(runs.iterdir()) if p.is_dir()] if runs.is_dir() else []
    _sweep_simulators(report, run_dirs, owned, lambda labels: False, leftovers=True)
    _sweep_ssh(report, is_owned_workspace)
    if runs.is_dir():
        for entry in sorted(runs.iterdir()):
            _remove_path(report, entry)
    return report


def _sweep_backends(report: SweepReport, owned: LabelMatch, keep: LabelMatch) -> None:
    for backend in inspectable_backends():
        try:
            outcome = inspector_for(backend).sweep(owned, keep)
        except BackendUnavailable as exc:
            report.errors.append(f"{backend}: {exc}")
            continue
        report.removed += [f"{backend} {item}" for item in outcome.removed]
        report.errors += [f"{backend} {item}" for item in outcome.errors]


def _sweep_simulators(report: SweepReport, run_dirs: list[Path], owned: LabelMatch, keep: LabelMatch, *,
                      leftovers: bool) -> None:
    """Each run dir's stand-in state: its sandboxes and volumes through the stand-in, then (`leftovers`) the Docker
    objects and image tags the stand-in made for that state."""
    for run_dir in run_dirs:
        for backend, simulator in SIMULATORS.items():
            home = simulator.home(run_dir)
            if not home.is_dir():
                continue
            target = f"{backend}{SIM_SUFFIX}"
            try:
                outcome = inspector_for(target, dict(simulator.environment(run_dir))).sweep(owned, keep)
            except BackendUnavailable as exc:
                report.errors.append(f"{target} ({home}): {exc}")
                continue
            report.removed += [f"{target} {item}" for item in outcome.removed]
            report.errors += [f"{target} {item}" for item in outcome.errors]
            if leftovers:
                _sweep_sim_docker(report, target, home)


def _sweep_sim_docker(report: SweepReport, target: str, home: Path) -> None:
    from fixtures.msb_sim.docker import sweep, untag_images
    from fixtures.msb_sim.errors import SimError
    from fixtures.msb_sim.state import home_key

    key = home_key(home)
    try:
        report.removed += [f"{target} docker object {name}" for name in sweep(key)]
        report.removed += [f"{target} image tag {tag}" for tag in untag_images(key)]
    except SimError as exc:
        report.errors.append(f"{target} docker objects of {home}: {exc}")


def _sweep_ssh(report: SweepReport, owns_id: Callable[[str], bool]) -> None:
    try:
        removed = ssh_blocks.remove_blocks(DEFAULT_SSH_CONFIG, owns_id)
    except OSError as exc:
        report.errors.append(f"ssh config {DEFAULT_SSH_CONFIG}: {exc}")
        return
    report.removed += [f"ssh block {ws} in {DEFAULT_SSH_CONFIG}" for ws in removed]


def _remove_path(report: SweepReport, path: Path) -> None:
    if not path.exists() and not path.is_symlink():
        return
    try:
        is_dir = path.is_dir() and not path.is_symlink()
        if is_dir:
            shutil.rmtree(path)
        else:
            path.unlink()
        report.removed.append(f"{'directory' if is_dir else 'file'} {path}")
    except OSError as exc:
        report.errors.append(f"{path}: {exc}")
