"""`devsy up`: decide between reuse, create and recreate, and undo exactly what a failed attempt created.

What only a new instance needs (image preparation, the uid layer, and with them the Docker SDK) is imported where an
instance is created: a reused `up` does not pay for it (about 85 ms of ~220, ci/bench_docker.py).
"""

from __future__ import annotations

import dataclasses
import io
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from devsy.devcontainer.background_hooks import (
    DeferredHooks,
    HooksState,
    clear_background_hooks,
    end_background_hooks,
    start_background_hooks,
)
from devsy.devcontainer.backend_settings import backend_warnings
from devsy.devcontainer.config import DevContainerConfig
from devsy.devcontainer.hooks import create_hooks_complete, run_up_hooks
from devsy.devcontainer.features.contributions import (
    apply_feature_contributions,
    with_feature_hooks,
    with_recorded_features,
)
from devsy.devcontainer.initialize_command import run_initialize_command
from devsy.devcontainer.lifecycle_commands import LifecycleCommand
from devsy.devcontainer.keep_alive import KEEP_ALIVE_ARGS, KEEP_ALIVE_ENTRYPOINT
from devsy.devcontainer.session_env import in_instance
from devsy.devcontainer.user_env_probe import ensure_user_env, with_user_env
from devsy.devcontainer.workspace_config import host_folder, load_workspace_config, remote_user, workspace_mount
from devsy.driver.base import (
    LABEL_CREATE_ATTEMPT,
    LABEL_REMOTE_USER,
    LABEL_WORKSPACE_UID,
    ContainerDetails,
    Driver,
    ExecRequest,
    Mount,
    RunOptions,
)
from devsy.driver.registry import (
    DEFAULT_PROVIDER,
    backend_pulls_images,
    make_driver,
    network_mode_of,
    row_for,
    validate_provider,
)
from devsy.driver.reuse import Ownership
from devsy.errors import ConfigError, DevsyError, WorkspaceError
from devsy.progress import Progress
from devsy.workspace.content import clone_git, remove_content, remove_stale_partials
from devsy.workspace.fsdirs import check_writable
from devsy.workspace.ids import derive_workspace_id, validate_workspace_id
from devsy.workspace.ledger import AttemptLedger
from devsy.workspace.lock import workspace_lock
from devsy.workspace.paths import WorkspacePaths, workspace_paths
from devsy.workspace.record import WorkspaceRecord, delete_record, load_record, save_record
from devsy.workspace.source import Source, parse_source
from devsy.workspace.sshconfig import check_block_writable
from devsy.ssh.config_entry import remove_ssh_entry, write_ssh_entry
from devsy.agent.install import install_agent_for_up
from devsy.ssh.mux.client import stop_master

if TYPE_CHECKING:
    from devsy.devcontainer.image_prepare import PreparedImage

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
    config: str = ""  # --config FILE (relative to the source folder, or absolute); empty: the recorded or found one
    wait_all_hooks: bool = False  # run the hooks after waitFor too before returning (else they go on in background)


@dataclass
class _Attempt:
    on_disk: WorkspaceRecord  # the record as saved before this attempt: its provider still names the old instance's
    made_content: bool = False  # this attempt (re)made the managed content folder
    replaced_instance: bool = False  # the driver replaced an existing instance: a later failure cannot bring it back
    wait_all_hooks: bool = False
    deferred: DeferredHooks | None = None  # the hooks after waitFor, started in the background once the up succeeded


@dataclass
class UpResult:
    record: WorkspaceRecord
    instance: ContainerDetails
    reused: bool
    background_hooks: HooksState | None = None


def up(request: UpRequest, progress: Progress) -> UpResult:
    source = parse_source(request.source, request.cwd)
    # `--id ""` is an invalid id, not "no id": only an absent --id derives one from the source.
    workspace_id = (validate_workspace_id(request.workspace_id) if request.workspace_id is not None
                    else derive_workspace_id(source))
    paths = workspace_paths(request.home, workspace_id)
    with workspace_lock(paths, command=f"devsy up {workspace_id}"):
        existing = load_record(paths)
        if existing is not None and existing.source.recorded() != source.recorded():
            raise WorkspaceError(
                f"workspace {workspace_id} already exists for another source ({existing.source_kind})",
                hint="pick another id with --id, or `devsy delete` the existing workspace first",
            )
        provider = request.provider or (existing.provider if existing else DEFAULT_PROVIDER)
        options = request.provider_options or (existing.provider_options if existing else {})
        validate_provider(provider, options)
        with AttemptLedger() as ledger:
            record = existing or _new_record(workspace_id, source, provider, options, request, paths, ledger)
            on_disk = dataclasses.replace(record)  # what the record says until this attempt succeeds
            record.provider, record.provider_options = provider, dict(options)
            # Everything written at the end must be writable before anything is created, or a full disk or a broken
            # ssh config block would cost a container created and rolled back (or, with --recreate, the old one).
            check_writable(paths.root, "the workspace record")
            check_block_writable(Path(record.ssh_config), record.id)
            attempt = _Attempt(on_disk, made_content=_materialize(source, paths, ledger, progress),
                               wait_all_hooks=request.wait_all_hooks)
            config = load_workspace_config(source, paths, workspace_id,
                                           request.config or (existing.config_path if existing else ""))
            # Before any driver or instance exists: its failure leaves only what the ledger removes.
            run_initialize_command(config.initialize_command, host_folder(source, paths), workspace_id, progress)
            driver = make_driver(provider, options)
            # An earlier up's later hooks may not run beside this one's. Ended only now: an up refused above leaves
            # them running. Meanwhile they may have marked a create hook done: the record takes that mark.
            if end_background_hooks(paths, progress) and existing is not None:
                _take_hook_marks(load_record(paths), record, attempt)
            if existing is not None and request.recreate:
                stop_master(request.home, existing.id, existing.uid)  # it serves the instance being replaced
            if existing is None:  # a failed first up leaves no record to delete its built images (layers) by
                ledger.add("remove the images built for the workspace", lambda: _remove_built_images(record.id))
            try:
                instance, reused = _ensure_instance(driver, record, config, paths, request.recreate, ledger,
                                                    progress, attempt)
                install_agent_for_up(driver, record.id, paths, progress, ledger, instance)
            except DevsyError as exc:
                if attempt.replaced_instance:
                    _explain_replaced(exc, record)
                raise
            record.workspace_folder = config.workspace_folder
            record.config_path = str(config.path or "")
            save_record(paths, record)
            if write_ssh_entry(record, request.home) and existing is None:
                ledger.add("remove the SSH config entry", lambda: remove_ssh_entry(record))
            ledger.commit()
        background = None
        if attempt.deferred is not None:
            background = start_background_hooks(paths, attempt.deferred, progress)
        else:
            clear_background_hooks(paths)
        return UpResult(record=record, instance=instance, reused=reused, background_hooks=background)


def _remove_built_images(workspace_id: str) -> None:
    from devsy.devcontainer.image_prepare import remove_built_images  # noqa: PLC0415 - see the module docstring

    remove_built_images(workspace_id)


def _take_hook_marks(saved: WorkspaceRecord | None, record: WorkspaceRecord, attempt: _Attempt) -> None:
    if saved is None:
        return
    for target in (record, attempt.on_disk):
        target.create_hooks_attempt, target.create_hooks_done = saved.create_hooks_attempt, \
            list(saved.create_hooks_done)


def _explain_replaced(exc: DevsyError, record: WorkspaceRecord) -> None:
    """Say honestly that a failed --recreate cannot give the old instance back (the driver removed it to make room)."""
    # In the message itself: the CLI prints message and hint, not exception notes.
    exc.message += (f"\nthe previous instance of workspace {record.id} had already been replaced when this failed; "
                    "the workspace's record, content and SSH entry are kept")
    exc.hint = (f"{exc.hint}; then " if exc.hint else "") + \
        f"run `devsy up {shlex.quote(record.source.shown())} --id {record.id}` to create a new instance"


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


def _materialize(source: Source, paths: WorkspacePaths, ledger: AttemptLedger, progress: Progress) -> bool:
    """Make the content folder devsy manages (git clone, or empty for an image); a local folder is used as is.
    True if this attempt made it."""
    if source.kind == "local" or paths.content.is_dir():
        return False
    remove_stale_partials(paths.content)
    ledger.add("remove the workspace content folder", lambda: remove_content(paths.content))
    if source.kind == "git":
        with progress.step("cloning the repository"):
            clone_git(source.value, paths.content, timeout=_GIT_CLONE_TIMEOUT_S)
    else:
        paths.content.mkdir(parents=True)
    return True


def _ensure_instance(driver: Driver, record: WorkspaceRecord, config: DevContainerConfig, paths: WorkspacePaths,
                     recreate: bool, ledger: AttemptLedger, progress: Progress,
                     attempt: _Attempt) -> tuple[ContainerDetails, bool]:
    folder = host_folder(record.source, paths)
    found = driver.find(record.id)
    if found is not None and not recreate:
        if attempt.made_content:
            # The instance still binds the folder that was removed by hand; a new folder does not reach it.
            raise WorkspaceError(
                f"the content folder {paths.content} of workspace {record.id} was removed while its instance exists",
                f"rerun with --recreate to give the instance the new folder (data kept only in the instance is lost), "
                f"or `devsy delete {record.id}`",
            )
        user = remote_user(config, found.labels.get(LABEL_REMOTE_USER, record.remote_user))
        # Always asked, whatever the provider advertises: the driver checks the labels itself when the provider
        # has no ReusePreflight of its own (API < 1.2), so a changed owner is refused the same way everywhere.
        driver.reuse_preflight(record.id, user, workspace_mount(config, folder, user).policy)
        label = found.labels.get(LABEL_CREATE_ATTEMPT, "")
        # No label: an instance of an older devsy, or a provider that reports none, whose hooks count as done.
        unfinished = bool(label) and not _create_hooks_done(record, label)
        config = with_recorded_features(config, record.feature_digests, progress)
        started = not found.running
        if started:
            with progress.step(f"starting workspace {record.id}"):
                driver.start(record.id)
            found = driver.find(record.id) or found
        # unfinished: the `up` that created this instance ended (killed, or its hook failed) before its create hooks
        # did; they run now, then postStart, as on a fresh instance. Every up ends with postAttach.
        _run_up_hooks(driver, record, label, config, user, paths, attempt, progress, create=unfinished,
                      start=started or unfinished)
        record.remote_user = user
        return found, True
    from devsy.devcontainer.image_prepare import prepare_image  # noqa: PLC0415 - see the module docstring

    # Before the image is prepared: a GPU the backend cannot give refuses the up while nothing exists yet.
    for warning in backend_warnings(record.provider, record.provider_options, config):
        progress.warn(warning)
    image = prepare_image(config, record.id, network_mode=network_mode_of(driver.name, record.provider_options),
                          progress=progress, backend_pulls=backend_pulls_images(driver.name))
    config = with_feature_hooks(config, image.features)
    user = remote_user(config, image.user)
    mount = workspace_mount(config, folder, user)
    image = _with_host_ids(image, config, record, user, mount.mount, driver, progress)
    create_attempt = secrets.token_hex(8)
    options = RunOptions(
        image=image.ref, image_built_locally=image.built_locally, user=config.container_user or "",
        remote_user=user, env=dict(config.container_env), workspace_mount=mount.mount, mounts=list(config.mounts),
        host_requirements=config.host_requirements, allow_recreate=found is not None,
        cap_add=list(config.cap_add), security_opt=list(config.security_opt), privileged=config.privileged,
        init=config.init, extra_hosts=list(config.extra_hosts), devices=list(config.devices),
        shm_size_bytes=config.shm_size_bytes,
        labels={**config.labels, LABEL_WORKSPACE_UID: record.uid, **Ownership(user, mount.policy).to_labels(),
                LABEL_CREATE_ATTEMPT: create_attempt},
    )
    if config.override_command:
        options.entrypoint, options.cmd = list(KEEP_ALIVE_ENTRYPOINT), list(KEEP_ALIVE_ARGS)
    apply_feature_contributions(options, image.features)  # after the command: Feature entrypoints wrap it
    with progress.step(f"{'recreating' if found else 'creating'} workspace {record.id} from {image.ref}"):
        instance = driver.run(record.id, options)
    attempt.replaced_instance = found is not None
    if found is not None and attempt.on_disk.user_env_key:
        # The probe on disk was the replaced instance's: a killed up must not leave it to the new one's sessions.
        # Only now: a replacement the provider refused leaves the record as it was.
        attempt.on_disk = dataclasses.replace(attempt.on_disk, user_env={}, user_env_key="")
        save_record(paths, attempt.on_disk)
    record.feature_digests = {feature.source.key: feature.digest for feature in image.features}
    ledger.add("remove the new instance", lambda: driver.delete(record.id))
    _require_user(driver, record.id, user, image.ref)
    _run_up_hooks(driver, record, create_attempt, config, user, paths, attempt, progress, create=True, start=True)
    record.remote_user = user
    return instance, False


def _with_host_ids(image: PreparedImage, config: DevContainerConfig, record: WorkspaceRecord, user: str,
                   workspace: Mount, driver: Driver, progress: Progress) -> PreparedImage:
    """updateRemoteUserUID (update_uid.py): the image with the remote user's ids made the host user's, where the
    provider runs images from this host's Docker engine; MicroSandbox's mount shows the workspace as the remote
    user's already; any other provider is told it is not applied."""
    from devsy.devcontainer.update_uid import host_ids, needs_uid_layer, uid_layer  # noqa: PLC0415 - module docstring

    ids = host_ids()
    if not needs_uid_layer(config.update_remote_user_uid, user, workspace, ids):
        return image
    assert ids is not None  # needs_uid_layer checked it
    row = row_for(record.provider)
    if row.backend == "microsandbox":
        return image
    if row.kind == "remote" or row.backend != "docker":
        progress.warn(f"updateRemoteUserUID is not applied on provider {record.provider}: it cannot be given an "
                      f"image layer built on this host, so {user} keeps the image's uid and gid")
        return image
    return uid_layer(image, user, ids, record.id,
                     network_mode=network_mode_of(driver.name, record.provider_options), progress=progress)


def _create_hooks_done(record: WorkspaceRecord, create_attempt: str) -> bool:
    return record.create_hooks_attempt == create_attempt and create_hooks_complete(record.create_hooks_done)


def _run_up_hooks(driver: Driver, record: WorkspaceRecord, create_attempt: str, config: DevContainerConfig,
                  user: str, paths: WorkspacePaths, attempt: _Attempt, progress: Progress, *, create: bool,
                  start: bool) -> None:
    """This up's guest hooks: (with `create`) the create hooks the instance of `create_attempt` has not completed,
    each one's completion on disk before the next starts, so a killed `up` leaves the next one exactly the hooks
    still to run; then postStart (with `start`) and postAttach."""
    config = in_instance(driver, record.id, config)  # ${containerEnv:...} and remoteEnv nulls (session_env.py)
    probed_before = record.user_env_key
    config = with_user_env(config, ensure_user_env(driver, record, create_attempt=create_attempt, user=user,
                                                   mode=config.user_env_probe, progress=progress,
                                                   passed_names=config.container_env.keys()))
    if record.user_env_key != probed_before:  # on disk at once, as the hook markers: sessions of a killed up's instance
        attempt.on_disk = dataclasses.replace(attempt.on_disk, user_env=dict(record.user_env),
                                              user_env_key=record.user_env_key)
        save_record(paths, attempt.on_disk)
    if not create:
        later = run_up_hooks(driver, record.id, config, user=user, progress=progress, create=False, start=start,
                             wait_all=attempt.wait_all_hooks)
        _defer(attempt, later, record, create_attempt, config, user)
        return
    if record.create_hooks_attempt != create_attempt:
        record.create_hooks_attempt, record.create_hooks_done = create_attempt, []

    def completed(name: str) -> None:
        record.create_hooks_done.append(name)
        # Only the hook markers change on disk: if the up fails later, the record must still describe the instance.
        attempt.on_disk = dataclasses.replace(attempt.on_disk, create_hooks_attempt=create_attempt,
                                              create_hooks_done=list(record.create_hooks_done))
        save_record(paths, attempt.on_disk)

    later = run_up_hooks(driver, record.id, config, user=user, progress=progress, create=True, start=start,
                         done=tuple(record.create_hooks_done), on_done=completed, wait_all=attempt.wait_all_hooks)
    _defer(attempt, later, record, create_attempt, config, user)


def _defer(attempt: _Attempt, later: list[LifecycleCommand], record: WorkspaceRecord, create_attempt: str,
           config: DevContainerConfig, user: str) -> None:
    if later:
        attempt.deferred = DeferredHooks(record.id, record.provider, dict(record.provider_options), create_attempt,
                                         tuple(later), user, config.workspace_folder, dict(config.remote_env))


_USER_NOT_CHECKABLE = (126, 127)  # no `id` in the image (distroless): the first exec will tell


def _require_user(driver: Driver, workspace_id: str, user: str, image: str) -> None:
    """Fail before the record is saved if the remote user does not exist in the image: every exec would fail."""
    if user == "root" or user.isdigit():
        return  # root always exists; a numeric uid needs no passwd entry
    out = io.BytesIO()
    result = driver.exec(workspace_id, ExecRequest(argv=["id", "-u", "--", user], stdout=out, stderr=out))
    if result.exit_code != 0 and result.exit_code not in _USER_NOT_CHECKABLE:
        raise ConfigError(
            f"remoteUser {user!r} does not exist in image {image} (workspace {workspace_id})",
            hint="set remoteUser (or containerUser) in devcontainer.json to a user the image has, or create that "
            "user in the image's Dockerfile",
        )
