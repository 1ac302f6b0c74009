"""`devsy up`: decide between reuse, create and recreate, and undo exactly what a failed attempt created."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from devsy.devcontainer.config import DevContainerConfig
from devsy.devcontainer.hooks import run_create_hooks, run_start_hooks
from devsy.devcontainer.image_prepare import prepare_image
from devsy.devcontainer.keep_alive import KEEP_ALIVE_ARGS, KEEP_ALIVE_ENTRYPOINT
from devsy.devcontainer.workspace_config import host_folder, load_workspace_config, remote_user, workspace_mount
from devsy.driver.base import LABEL_MOUNT_POLICY, LABEL_REMOTE_USER, LABEL_WORKSPACE_UID, ContainerDetails, Driver, \
    RunOptions
from devsy.driver.registry import DEFAULT_PROVIDER, make_driver, network_mode_of, validate_provider
from devsy.errors import WorkspaceError
from devsy.progress import Progress
from devsy.workspace.content import clone_git, remove_content, remove_stale_partials
from devsy.workspace.ids import derive_workspace_id, validate_workspace_id
from devsy.workspace.ledger import AttemptLedger
from devsy.workspace.lock import workspace_lock
from devsy.workspace.paths import WorkspacePaths, workspace_paths
from devsy.workspace.record import WorkspaceRecord, delete_record, load_record, save_record
from devsy.workspace.source import Source, parse_source
from devsy.ssh.config_entry import remove_ssh_entry, write_ssh_entry
from devsy.agent.install import install_agent_for_up
from devsy.ssh.mux_client import stop_master

_GIT_CLONE_TIMEOUT_S = 600


@dataclass
class UpRequest:
    source: str
    cwd: Path
    home: Path
    ssh_config: Path
    workspace_id: str | None = None
    provider: str | None = None
    provider_options: dict[str, str] = field(default_factory=dict)
    recreate: bool = False


@dataclass
class UpResult:
    record: WorkspaceRecord
    instance: ContainerDetails
    reused: bool


def up(request: UpRequest, progress: Progress) -> UpResult:
    source = parse_source(request.source, request.cwd)
    workspace_id = (validate_workspace_id(request.workspace_id) if request.workspace_id
                    else derive_workspace_id(source))
    paths = workspace_paths(request.home, workspace_id)
    with workspace_lock(paths, command=f"devsy up {workspace_id}"):
        existing = load_record(paths)
        if existing is not None and existing.source != source:
            raise WorkspaceError(
                f"workspace {workspace_id} already exists for another source ({existing.source_kind})",
                hint="pick another id with --id, or `devsy delete` the existing workspace first",
            )
        provider = request.provider or (existing.provider if existing else DEFAULT_PROVIDER)
        options = request.provider_options or (existing.provider_options if existing else {})
        validate_provider(provider, options)
        with AttemptLedger() as ledger:
            record = existing or _new_record(workspace_id, source, provider, options, request, paths, ledger)
            record.provider, record.provider_options = provider, dict(options)
            _materialize(source, paths, ledger, progress)
            config = load_workspace_config(source, paths, workspace_id)
            driver = make_driver(provider, options)
            if existing is not None and request.recreate:
                stop_master(request.home, existing.id, existing.uid)  # it serves the instance being replaced
            instance, reused = _ensure_instance(driver, record, config, paths, request.recreate, ledger, progress)
            install_agent_for_up(driver, record.id, paths, progress, ledger)
            record.workspace_folder = config.workspace_folder
            record.config_path = str(config.path or "")
            save_record(paths, record)
            if write_ssh_entry(record, request.home) and existing is None:
                ledger.add("remove the SSH config entry", lambda: remove_ssh_entry(record))
            ledger.commit()
        return UpResult(record=record, instance=instance, reused=reused)


def _new_record(workspace_id: str, source: Source, provider: str, options: dict[str, str], request: UpRequest,
                paths: WorkspacePaths, ledger: AttemptLedger) -> WorkspaceRecord:
    record = WorkspaceRecord.new(workspace_id, source, provider, options, request.ssh_config)
    save_record(paths, record)
    ledger.add("remove the workspace record", lambda: _remove_record_dir(paths))
    return record


def _remove_record_dir(paths: WorkspacePaths) -> None:
    delete_record(paths)
    if paths.root.is_dir() and not any(paths.root.iterdir()):
        paths.root.rmdir()


def _materialize(source: Source, paths: WorkspacePaths, ledger: AttemptLedger, progress: Progress) -> None:
    """Make the content folder devsy manages (git clone, or empty for an image); a local folder is used as is."""
    if source.kind == "local" or paths.content.is_dir():
        return
    remove_stale_partials(paths.content)
    ledger.add("remove the workspace content folder", lambda: remove_content(paths.content))
    if source.kind == "git":
        with progress.step("cloning the repository"):
            clone_git(source.value, paths.content, timeout=_GIT_CLONE_TIMEOUT_S)
    else:
        paths.content.mkdir(parents=True)


def _ensure_instance(driver: Driver, record: WorkspaceRecord, config: DevContainerConfig, paths: WorkspacePaths,
                     recreate: bool, ledger: AttemptLedger, progress: Progress) -> tuple[ContainerDetails, bool]:
    folder = host_folder(record.source, paths)
    found = driver.find(record.id)
    if found is not None and not recreate:
        user = remote_user(config, found.labels.get(LABEL_REMOTE_USER, record.remote_user))
        if driver.capabilities().reuse_preflight:
            driver.reuse_preflight(record.id, user, workspace_mount(config, folder, user).policy)
        if not found.running:
            with progress.step(f"starting workspace {record.id}"):
                driver.start(record.id)
            run_start_hooks(driver, record.id, config, user=user, progress=progress)
            found = driver.find(record.id) or found
        record.remote_user = user
        return found, True
    image = prepare_image(config, record.id, network_mode=network_mode_of(driver.name, record.provider_options),
                          progress=progress)
    user = remote_user(config, image.user)
    mount = workspace_mount(config, folder, user)
    options = RunOptions(
        image=image.ref, image_built_locally=image.built_locally, user=config.container_user or "",
        remote_user=user, env=dict(config.container_env), workspace_mount=mount.mount, mounts=list(config.mounts),
        host_requirements=config.host_requirements, allow_recreate=found is not None,
        labels={LABEL_WORKSPACE_UID: record.uid, LABEL_REMOTE_USER: user, LABEL_MOUNT_POLICY: mount.policy},
    )
    if config.override_command:
        options.entrypoint, options.cmd = list(KEEP_ALIVE_ENTRYPOINT), list(KEEP_ALIVE_ARGS)
    with progress.step(f"{'recreating' if found else 'creating'} workspace {record.id} from {image.ref}"):
        instance = driver.run(record.id, options)
    ledger.add("remove the new instance", lambda: driver.delete(record.id))
    run_create_hooks(driver, record.id, config, user=user, progress=progress)
    record.remote_user = user
    return instance, False
