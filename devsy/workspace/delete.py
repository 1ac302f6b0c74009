"""`devsy delete`: remove everything of a workspace, also when its record is corrupt, continuing past failures.

A corrupt record is the one case where devsy does not know the workspace's provider. What it still knows is the id,
and every devsy-made instance carries the labels `dev.devsy.managed=true` and `dev.devsy.workspace=<id>`: the same
selection an intact record's delete uses. So the provider is taken from whatever of the record still parses, else
the default provider (docker) is asked; a workspace that lived on another provider keeps its instance, and the
output says which provider was searched and how to look elsewhere. Guessing a provider from a list is not done: it
would start external provider processes on the strength of a file known to be damaged.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from devsy.devcontainer.image_prepare import remove_built_images
from devsy.driver.base import LABEL_WORKSPACE
from devsy.driver.registry import DEFAULT_PROVIDER, make_driver, validate_provider
from devsy.errors import CorruptRecord, DevsyError, WorkspaceError, WorkspaceNotFound
from devsy.progress import Progress
from devsy.ssh.mux.client import stop_master
from devsy.ssh.mux.processes import stop_masters_under
from devsy.workspace.content import remove_content
from devsy.workspace.paths import WorkspacePaths, ssh_config_path
from devsy.workspace.record import delete_record, load_record, salvage_record
from devsy.workspace.sshconfig import remove_block


@dataclass(frozen=True)
class _Target:
    """What delete removes, from the record or, for a corrupt one, from what could be salvaged."""

    workspace_id: str
    uid: str
    provider: str
    provider_options: dict[str, str] = field(default_factory=dict)
    ssh_config: Path = field(default_factory=ssh_config_path)
    corrupt: bool = False


def delete_workspace(home: Path, paths: WorkspacePaths, progress: Progress) -> None:
    """Remove the workspace of `paths`; call while holding its lock. Every step runs even if an earlier one failed;
    the record is removed last, and only if all else was, so `devsy delete` can be run again on what is left."""
    target = _target(paths)
    if target.corrupt:
        progress.info(f"the record of workspace {target.workspace_id} is corrupt: looking for its instance with "
                      f"provider {target.provider} by its devsy labels")
    failures: list[str] = []

    def attempt(what: str, step: Callable[[], object]) -> None:
        try:
            step()
        except DevsyError as exc:
            failures.append(f"{what}: {exc.message}")
        except OSError as exc:
            failures.append(f"{what}: {exc.strerror or exc}")

    with progress.step(f"deleting workspace {target.workspace_id}"):
        attempt("stop its ssh master", lambda: _stop_master(home, target))
        attempt(f"remove its instance (provider {target.provider})",
                lambda: make_driver(target.provider, target.provider_options).delete(target.workspace_id))
        attempt("remove the images built for it", lambda: remove_built_images(target.workspace_id))
        attempt("remove its SSH config entry", lambda: remove_block(target.ssh_config, target.workspace_id))
        attempt("remove its content folder", lambda: remove_content(paths.content))
        if failures:
            raise WorkspaceError(
                f"workspace {target.workspace_id} was not fully deleted; what failed:\n"
                + "\n".join(f"  {failure}" for failure in failures),
                _hint(target),
            )
        delete_record(paths)
        shutil.rmtree(paths.root, ignore_errors=True)  # only devsy's own files live here; the lock file goes on release


def _target(paths: WorkspacePaths) -> _Target:
    workspace_id = paths.root.name
    try:
        record = load_record(paths)
    except CorruptRecord:
        return _salvaged_target(paths)
    if record is None:
        raise WorkspaceNotFound(f"workspace {workspace_id} does not exist",
                                hint="list workspaces with `devsy list`, or create it with `devsy up`")
    return _Target(workspace_id, record.uid, record.provider, dict(record.provider_options),
                   Path(record.ssh_config))


def _salvaged_target(paths: WorkspacePaths) -> _Target:
    salvaged = salvage_record(paths)
    provider, options = salvaged.provider, salvaged.provider_options
    try:
        validate_provider(provider, options)
    except DevsyError:
        provider, options = DEFAULT_PROVIDER, {}
    ssh_config = Path(salvaged.ssh_config) if salvaged.ssh_config else ssh_config_path()
    return _Target(paths.root.name, salvaged.uid, provider, options, ssh_config, corrupt=True)


def _stop_master(home: Path, target: _Target) -> None:
    if target.uid:
        stop_master(home, target.workspace_id, target.uid)
    else:  # the uid was lost with the record: the master is still found by its workspace id
        stop_masters_under(home, lambda workspace: workspace == target.workspace_id)


def _hint(target: _Target) -> str:
    hint = f"fix what failed, then run `devsy delete {target.workspace_id}` again (the record is kept until then)"
    if target.corrupt:
        hint += (f"; the instance was looked for with provider {target.provider}: on another backend, find it by "
                 f"the label {LABEL_WORKSPACE}={target.workspace_id}")
    return hint
