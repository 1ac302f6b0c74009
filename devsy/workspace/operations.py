"""The commands on an existing workspace: status, list, start, stop, delete, exec, logs."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from devsy.devcontainer.session_env import apply_to_exec, in_instance, workspace_session_env
from devsy.devcontainer.user_env_probe import stored_user_env, with_user_env
from devsy.devcontainer.workspace_config import host_folder, load_workspace_config
from devsy.driver.base import ContainerDetails, Driver, ExecRequest, ExecResult
from devsy.driver.registry import make_driver
from devsy.errors import WorkspaceError, WorkspaceNotFound
from devsy.progress import Progress
from devsy.workspace.ids import validate_workspace_id
from devsy.workspace.lock import workspace_lock
from devsy.workspace.paths import WorkspacePaths, workspace_paths
from devsy.workspace.record import WorkspaceRecord, list_records, load_record

# What only some commands need is imported in them: `devsy exec` and `status` start without the hook runner, the
# background hooks, the SSH master client or delete's image clean-up (which imports the Docker SDK for every driver).
if TYPE_CHECKING:
    from devsy.devcontainer.background_hooks import HooksState


@dataclass
class WorkspaceState:
    record: WorkspaceRecord
    instance: ContainerDetails | None
    background_hooks: HooksState | None = None

    @property
    def status(self) -> str:
        if self.instance is None:
            return "absent"
        return self.instance.status.value


@dataclass
class OpenWorkspace:
    paths: WorkspacePaths
    record: WorkspaceRecord
    driver: Driver


def open_workspace(home: Path, raw_id: str) -> OpenWorkspace:
    workspace_id = validate_workspace_id(raw_id)
    paths = workspace_paths(home, workspace_id)
    record = load_record(paths)
    if record is None:
        raise WorkspaceNotFound(f"workspace {workspace_id} does not exist",
                                hint="list workspaces with `devsy list`, or create it with `devsy up`")
    return OpenWorkspace(paths=paths, record=record, driver=make_driver(record.provider, record.provider_options))


@contextlib.contextmanager
def _locked(home: Path, raw_id: str, command: str) -> Iterator[OpenWorkspace]:
    workspace_id = validate_workspace_id(raw_id)
    with workspace_lock(workspace_paths(home, workspace_id), command=f"devsy {command} {workspace_id}"):
        yield open_workspace(home, workspace_id)


def status(home: Path, raw_id: str) -> WorkspaceState:
    from devsy.devcontainer.background_hooks import read_state

    ws = open_workspace(home, raw_id)
    return WorkspaceState(ws.record, ws.driver.find(ws.record.id), read_state(ws.paths))


def list_workspaces(home: Path) -> list[WorkspaceRecord]:
    return list_records(home)


def start(home: Path, raw_id: str, progress: Progress) -> WorkspaceState:
    from devsy.devcontainer.background_hooks import end_background_hooks, read_state
    from devsy.devcontainer.hooks import run_start_hooks

    with _locked(home, raw_id, "start") as ws:
        _require_host_folder(ws)
        found = ws.driver.find(ws.record.id)
        if found is None or not found.running:  # a running one keeps its background hooks: start has nothing to do
            end_background_hooks(ws.paths, progress)
            with progress.step(f"starting workspace {ws.record.id}"):
                ws.driver.start(ws.record.id)
            config = load_workspace_config(ws.record.source, ws.paths, ws.record.id, ws.record.config_path)
            from devsy.devcontainer.features.contributions import with_recorded_features  # docker: only start

            config = with_recorded_features(config, ws.record.feature_digests, progress)
            config = with_user_env(in_instance(ws.driver, ws.record.id, config),
                                   stored_user_env(ws.record, config.user_env_probe))
            run_start_hooks(ws.driver, ws.record.id, config, user=ws.record.remote_user, progress=progress)
        return WorkspaceState(ws.record, ws.driver.find(ws.record.id), read_state(ws.paths))


def stop(home: Path, raw_id: str, progress: Progress) -> WorkspaceState:
    from devsy.devcontainer.background_hooks import end_background_hooks, read_state
    from devsy.ssh.mux.client import stop_master

    with _locked(home, raw_id, "stop") as ws:
        end_background_hooks(ws.paths, progress)  # before the instance stops under their guest command
        stop_master(home, ws.record.id, ws.record.uid)
        found = ws.driver.find(ws.record.id)
        if found is not None and found.running:
            with progress.step(f"stopping workspace {ws.record.id}"):
                ws.driver.stop(ws.record.id)
        return WorkspaceState(ws.record, ws.driver.find(ws.record.id), read_state(ws.paths))


def delete(home: Path, raw_id: str, progress: Progress) -> str:
    """Remove the instance, images built for it, the SSH entry, managed content and the record; a local source
    folder is never touched. Works on a corrupt record too (see delete.py)."""
    from devsy.devcontainer.background_hooks import end_background_hooks
    from devsy.workspace.delete import delete_workspace

    workspace_id = validate_workspace_id(raw_id)
    paths = workspace_paths(home, workspace_id)
    with workspace_lock(paths, command=f"devsy delete {workspace_id}"):
        end_background_hooks(paths, progress)
        delete_workspace(home, paths, progress)
    return workspace_id


def _require_host_folder(ws: OpenWorkspace) -> None:
    """A bind source removed by hand makes the engine fail with a raw "possible container breakout" error: say what
    happened instead, before the exec."""
    folder = host_folder(ws.record.source, ws.paths)
    if folder.is_dir():
        return
    if ws.record.source_kind == "local":
        raise WorkspaceError(
            f"the folder {folder} of workspace {ws.record.id} no longer exists",
            f"restore that folder, or run `devsy delete {ws.record.id}` to remove the workspace",
        )
    raise WorkspaceError(
        f"the content folder {folder} of workspace {ws.record.id} was removed",
        f"run `devsy up {shlex.quote(ws.record.source.shown())} --id {ws.record.id} --recreate` to recreate it "
        f"(data kept only in the instance is lost), or `devsy delete {ws.record.id}`",
    )


def exec_target(ws: OpenWorkspace, user: str, workdir: str) -> tuple[str, str]:
    """Who runs a `devsy exec` command and where: the record's remote user and workspace folder unless given, once
    the workspace's host folder is known to be there (for the driver path here and the SSH master alike)."""
    _require_host_folder(ws)
    return user or ws.record.remote_user, workdir or ws.record.workspace_folder


def exec_command(home: Path, raw_id: str, request: ExecRequest) -> ExecResult:
    ws = open_workspace(home, raw_id)
    request.user, request.workdir = exec_target(ws, request.user, request.workdir)
    apply_to_exec(request, workspace_session_env(ws.record, ws.paths, lambda: ws.driver, request.user))  # re-read now
    return ws.driver.exec(ws.record.id, request)


def logs(home: Path, raw_id: str, out: BinaryIO) -> None:
    ws = open_workspace(home, raw_id)
    ws.driver.logs(ws.record.id, out)


def hooks_log(home: Path, raw_id: str, out: BinaryIO, *, follow: bool) -> HooksState | None:
    """The output of the hooks the last `devsy up` left to the background; with `follow`, until they end."""
    from devsy.devcontainer.background_hooks import follow_log

    ws = open_workspace(home, raw_id)
    return follow_log(ws.paths, out, follow=follow)
