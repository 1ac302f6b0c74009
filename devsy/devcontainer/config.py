"""devcontainer.json located, parsed, substituted and validated into a typed DevContainerConfig."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devsy.devcontainer.features.model import UserFeature, parse_override_order, parse_user_features
from devsy.devcontainer.json_fields import (
    env_map,
    opt_bool,
    opt_dict,
    opt_list,
    opt_str,
    opt_tristate,
    str_list,
    str_map,
)
from devsy.devcontainer.jsonc import json_type_name, load_jsonc
from devsy.devcontainer.lifecycle_commands import (
    DEFAULT_WAIT_FOR,
    LifecycleCommand,
    parse_lifecycle_command,
    parse_wait_for,
)
from devsy.devcontainer.mounts import parse_mount
from devsy.devcontainer.run_args import RunArgs, parse_run_args
from devsy.devcontainer.variables import (
    SubstitutionContext,
    container_substitute,
    devcontainer_id_for_labels,
    substitute,
    uses_container_env,
)
from devsy.driver.base import GpuRequirement, HostRequirements, Mount
from devsy.errors import ConfigError

USER_ENV_PROBES = ("none", "loginShell", "interactiveShell", "loginInteractiveShell")
DEFAULT_USER_ENV_PROBE = "loginInteractiveShell"  # the spec's default
CONFIG_LOCATIONS = (Path(".devcontainer") / "devcontainer.json", Path(".devcontainer.json"))
# The spec's top-level properties (devcontainers/spec schemas/devContainer.base.schema.json) that devsy reads.
_READ = frozenset({
    "$schema", "name", "image", "build", "dockerFile", "context", "workspaceFolder", "workspaceMount", "mounts",
    "containerEnv", "remoteEnv", "containerUser", "remoteUser", "overrideCommand", "hostRequirements", "runArgs",
    "capAdd", "securityOpt", "privileged", "init", "initializeCommand", "onCreateCommand", "updateContentCommand",
    "postCreateCommand", "postStartCommand", "postAttachCommand", "waitFor", "userEnvProbe", "updateRemoteUserUID",
    "customizations", "features", "overrideFeatureInstallOrder", "dockerComposeFile",
})
# The spec's other top-level properties: devsy knows them and does not act on them (one warning each).
_NOT_APPLIED = {
    "forwardPorts": "devsy forwards no ports (the workspace is reached over `ssh <id>.devsy`)",
    "portsAttributes": "devsy forwards no ports",
    "otherPortsAttributes": "devsy forwards no ports",
    "appPort": "devsy publishes no ports",
    "shutdownAction": "devsy stops a workspace only on `devsy stop`",
    "secrets": "devsy does not prompt for recommended secrets; pass values with containerEnv and ${localEnv:...}",
    "service": "it belongs to Docker Compose configurations, which are not supported",
    "runServices": "it belongs to Docker Compose configurations, which are not supported",
}
# Keys that change what a devcontainer is; ignoring them would silently build the wrong environment.
_UNSUPPORTED = {
    "dockerComposeFile": "Docker Compose configurations are not supported yet; use \"image\" or \"build\" instead.",
}
_SIZE = re.compile(r"^(\d+)\s*([kmgt]b?)?$", re.IGNORECASE)
_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


@dataclass(frozen=True)
class BuildConfig:
    """A Dockerfile build; paths are absolute, resolved against the devcontainer.json's folder."""

    dockerfile: Path
    context: Path
    args: dict[str, str] = field(default_factory=dict)
    target: str | None = None


@dataclass
class DevContainerConfig:
    """A validated devcontainer.json with every variable the host can know substituted."""

    path: Path | None
    workspace_folder: str
    name: str | None = None
    image: str | None = None
    build: BuildConfig | None = None
    remote_user: str | None = None
    container_user: str | None = None
    container_env: dict[str, str] = field(default_factory=dict)
    remote_env: dict[str, str] = field(default_factory=dict)
    remote_env_unset: list[str] = field(default_factory=list)  # remoteEnv names set to null: unset in sessions
    mounts: list[Mount] = field(default_factory=list)
    workspace_mount: Mount | None = None  # None: the runner's default bind of the workspace folder
    override_command: bool = True
    host_requirements: HostRequirements = field(default_factory=HostRequirements)
    # Container settings (devcontainer.json capAdd, securityOpt, privileged, init); None = not written.
    cap_add: list[str] = field(default_factory=list)
    security_opt: list[str] = field(default_factory=list)
    privileged: bool | None = None
    init: bool | None = None
    # From runArgs: the run options the devcontainer.json properties have no field for.
    labels: dict[str, str] = field(default_factory=dict)
    extra_hosts: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    shm_size_bytes: int | None = None
    # runArgs options the Runtime Protocol cannot carry (only the built-in Docker driver applies them).
    docker_only_run_args: list[str] = field(default_factory=list)
    # What devsy read but cannot act on (said once each by `devsy up`, never dropped silently).
    warnings: list[str] = field(default_factory=list)
    initialize_command: LifecycleCommand | None = None  # on the host, before anything is created
    on_create_command: LifecycleCommand | None = None
    update_content_command: LifecycleCommand | None = None
    post_create_command: LifecycleCommand | None = None
    post_start_command: LifecycleCommand | None = None
    post_attach_command: LifecycleCommand | None = None
    wait_for: str = DEFAULT_WAIT_FOR
    user_env_probe: str = DEFAULT_USER_ENV_PROBE  # how sessions and hooks get the user's shell environment
    update_remote_user_uid: bool = True  # the spec's default on Linux (update_uid.py)
    features: list[UserFeature] = field(default_factory=list)  # as written; resolved when the image is prepared
    override_feature_install_order: list[str] = field(default_factory=list)
    # The variables of this config, for what Features declare (their mounts' ${devcontainerId} and the like).
    substitution: SubstitutionContext | None = field(default=None, repr=False)
    # Lifecycle commands the config's Features declare, per hook name, in install order: they run before the config's
    # own (with_feature_hooks, features/contributions.py). Filled once the Features are resolved.
    feature_hooks: dict[str, tuple[LifecycleCommand, ...]] = field(default_factory=dict)
    # The substituted devcontainer.json when it still holds ${containerEnv:...} (see resolve_container_env).
    substituted: dict[str, Any] | None = field(default=None, repr=False)


def config_candidates(folder: Path) -> list[Path]:
    """Every devcontainer.json of `folder`: the two well-known places, then `.devcontainer/<name>/devcontainer.json`."""
    found = [folder / relative for relative in CONFIG_LOCATIONS if (folder / relative).is_file()]
    return found + sorted(p for p in (folder / ".devcontainer").glob("*/devcontainer.json") if p.is_file())


def find_config(folder: Path) -> Path | None:
    """The one devcontainer.json of `folder` at a well-known place, or None; ConfigError if there are several.

    The reference CLI looks only at .devcontainer/devcontainer.json, then .devcontainer.json, and never at
    .devcontainer/<name>/devcontainer.json without --config; devsy does the same, but refuses to guess when a folder
    has more than one config (the reference would silently take the first)."""
    candidates = config_candidates(folder)
    if len(candidates) > 1:
        listed = ", ".join(str(p.relative_to(folder)) for p in candidates)
        raise ConfigError(f"{folder} has {len(candidates)} devcontainer configurations: {listed}",
                          hint=f"choose one with --config, e.g. `devsy up {folder} --config "
                               f"{candidates[-1].relative_to(folder)}`")
    if candidates and candidates[0].relative_to(folder) in CONFIG_LOCATIONS:
        return candidates[0]
    return None


def chosen_config(folder: Path, choice: str) -> Path:
    """`--config FILE` (or the one the workspace's record remembers): relative to the workspace folder, or absolute;
    it must be a file."""
    path = (folder / choice).resolve()
    if not path.is_file():
        raise ConfigError(f"the devcontainer config {path} is not a file",
                          hint=f"choose an existing devcontainer.json with `devsy up {folder} --config FILE` "
                               "(relative to that folder, or absolute); the workspace remembers the choice")
    return path


def default_workspace_folder(workspace_basename: str) -> str:
    return f"/workspaces/{workspace_basename}"


def image_only_config(image: str, workspace_basename: str) -> DevContainerConfig:
    """The config for a bare image source, with spec defaults for everything else."""
    return DevContainerConfig(path=None, image=image, workspace_folder=default_workspace_folder(workspace_basename))


def resolve_container_env(config: DevContainerConfig, container_env: Mapping[str, str]) -> DevContainerConfig:
    """`config` with ${containerEnv:...} resolved from the running instance's environment in what applies once it
    exists (the reference's containerSubstitute): remoteEnv and the lifecycle commands run in the guest."""
    if config.substituted is None or config.path is None:
        return config
    values = container_substitute(config.substituted, container_env, where=str(config.path))
    resolved = _build_config(values, config.path, config.workspace_folder)
    after = ["remote_env", "remote_env_unset", *(f.name for f in dataclasses.fields(config)
                                                  if f.name.endswith("_command") and f.name != "initialize_command")]
    return dataclasses.replace(config, substituted=None, **{name: getattr(resolved, name) for name in after})


def load_config(
    local_folder: Path,
    *,
    config_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    devcontainer_id: str | None = None,
) -> DevContainerConfig:
    """Find, parse, substitute and validate the devcontainer.json of `local_folder` (or `config_path`).

    `env` backs ${localEnv:...} (default: this process's environment); `devcontainer_id` backs ${devcontainerId}
    (default: the reference CLI's id of the labels devcontainer.local_folder and devcontainer.config_file, stable
    across rebuilds). ${containerEnv:...} stays as written until `resolve_container_env`.
    """
    local_folder = local_folder.resolve()
    path = config_path.resolve() if config_path is not None else find_config(local_folder)
    if path is None:
        named = config_candidates(local_folder)
        if named:  # .devcontainer/<name>/devcontainer.json only: the reference CLI needs --config for it too
            raise ConfigError(
                f"no .devcontainer/devcontainer.json or .devcontainer.json in {local_folder}; it has "
                f"{', '.join(str(p.relative_to(local_folder)) for p in named)}",
                hint=f"choose it with --config, e.g. `devsy up {local_folder} --config "
                     f"{named[0].relative_to(local_folder)}`")
        raise ConfigError(
            f"no devcontainer.json in {local_folder}",
            hint="Create .devcontainer/devcontainer.json (or .devcontainer.json), or start from an image instead.",
        )
    if not path.is_file():
        raise ConfigError(f"the devcontainer config {path} is not a file",
                          hint="give --config an existing devcontainer.json, absolute or relative to the folder")
    raw = load_jsonc(path)
    for key, hint in _UNSUPPORTED.items():
        if key in raw and raw[key] not in ({}, None):
            raise ConfigError(f'{path}: "{key}" is not supported yet', hint=hint)
    ctx = SubstitutionContext(
        local_workspace_folder=str(local_folder),
        env=os.environ if env is None else env,
        devcontainer_id=devcontainer_id or _default_devcontainer_id(local_folder, path),
        where=str(path),
    )
    # containerWorkspaceFolder is defined by workspaceFolder, so that one key is resolved with local variables first.
    workspace_folder = substitute(opt_str(raw, "workspaceFolder", path), ctx) or default_workspace_folder(
        local_folder.name
    )
    if not workspace_folder.startswith("/"):
        raise ConfigError(
            f'{path}: "workspaceFolder" must be an absolute path in the container',
            hint='Start it with "/", e.g. "/workspaces/${localWorkspaceFolderBasename}".',
        )
    values = substitute(raw, ctx.with_container_workspace_folder(workspace_folder))
    config = _build_config(values, path, workspace_folder)
    config.substitution = ctx.with_container_workspace_folder(workspace_folder)
    _apply_run_args(config, parse_run_args(str_list(values, "runArgs", path), path, ctx.env))
    config.warnings.extend(_property_warnings(raw))
    return config


def _apply_run_args(config: DevContainerConfig, run: RunArgs) -> None:
    """runArgs on top of the properties, as the reference CLI puts them after its own `docker run` options."""
    config.container_env.update(run.env)
    config.labels.update(run.labels)
    config.cap_add.extend(run.cap_add)
    config.security_opt.extend(run.security_opt)
    config.privileged = run.privileged if run.privileged is not None else config.privileged
    config.init = run.init if run.init is not None else config.init
    config.extra_hosts, config.devices, config.shm_size_bytes = run.extra_hosts, run.devices, run.shm_size_bytes
    config.docker_only_run_args = run.docker_only()


def _property_warnings(raw: dict[str, Any]) -> list[str]:
    """One warning per top-level property devsy does not act on: a spec property it has no use for, or one the
    spec does not define (a typo, or another tool's extension)."""
    warnings = []
    for key in raw:
        if key in _READ:
            continue
        if key in _NOT_APPLIED:
            warnings.append(f'"{key}" in devcontainer.json has no effect: {_NOT_APPLIED[key]}')
        else:
            warnings.append(f'"{key}" in devcontainer.json is not a devcontainer.json property devsy knows; '
                            "it is ignored (check its spelling)")
    return warnings


def _build_config(raw: dict[str, Any], path: Path, workspace_folder: str) -> DevContainerConfig:
    image = opt_str(raw, "image", path)
    build = _build_section(raw, path)
    if image and build:
        raise ConfigError(f'{path}: both "image" and "build" are set', hint='Keep one: "image" or "build".')
    if not image and not build:
        raise ConfigError(
            f'{path}: neither "image" nor "build" is set',
            hint='Add "image": "<name>" or "build": {"dockerfile": "Dockerfile"}.',
        )
    workspace_mount = raw.get("workspaceMount")
    warnings: list[str] = []
    return DevContainerConfig(
        path=path,
        workspace_folder=workspace_folder,
        name=opt_str(raw, "name", path),
        image=image,
        build=build,
        remote_user=opt_str(raw, "remoteUser", path),
        container_user=opt_str(raw, "containerUser", path),
        container_env=str_map(raw, "containerEnv", path),
        remote_env={k: v for k, v in env_map(raw, "remoteEnv", path).items() if v is not None},
        remote_env_unset=[k for k, v in env_map(raw, "remoteEnv", path).items() if v is None],
        substituted=raw if uses_container_env(raw) else None,
        mounts=[parse_mount(item, f"{path}: mounts[{i}]") for i, item in enumerate(opt_list(raw, "mounts", path))],
        workspace_mount=parse_mount(workspace_mount, f"{path}: workspaceMount") if workspace_mount else None,
        override_command=opt_bool(raw, "overrideCommand", path, default=True),
        host_requirements=_host_requirements(raw, path, warnings),
        cap_add=str_list(raw, "capAdd", path),
        security_opt=str_list(raw, "securityOpt", path),
        privileged=opt_tristate(raw, "privileged", path),
        init=opt_tristate(raw, "init", path),
        user_env_probe=_user_env_probe(raw.get("userEnvProbe"), path),
        update_remote_user_uid=opt_bool(raw, "updateRemoteUserUID", path, default=True),
        warnings=warnings,
        features=parse_user_features(raw.get("features"), path.parent, str(path)),
        override_feature_install_order=parse_override_order(raw.get("overrideFeatureInstallOrder"), str(path)),
        **_lifecycle_fields(raw, path),
    )


def _user_env_probe(value: object, path: Path) -> str:
    if value is None:
        return DEFAULT_USER_ENV_PROBE
    if value not in USER_ENV_PROBES:
        raise ConfigError(f'{path}: "userEnvProbe" must be one of {", ".join(USER_ENV_PROBES)}, not {value!r}',
                          hint=f'use "{DEFAULT_USER_ENV_PROBE}" (the default) or "none" for no probe')
    return str(value)


def _lifecycle_fields(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """The lifecycle hooks and waitFor, keyed by DevContainerConfig field."""
    hooks = {"initialize_command": "initializeCommand", "on_create_command": "onCreateCommand",
             "update_content_command": "updateContentCommand", "post_create_command": "postCreateCommand",
             "post_start_command": "postStartCommand", "post_attach_command": "postAttachCommand"}
    fields: dict[str, Any] = {field_name: parse_lifecycle_command(key, raw.get(key), where=str(path))
                              for field_name, key in hooks.items()}
    fields["wait_for"] = parse_wait_for(raw.get("waitFor"), where=str(path))
    return fields


def _build_section(raw: dict[str, Any], path: Path) -> BuildConfig | None:
    if "dockerFile" not in raw and "build" not in raw:
        return None
    section = opt_dict(raw, "build", path)
    # The legacy top-level "dockerFile"/"context" win over build.*, as in the devcontainers CLI.
    if "dockerFile" in raw:
        dockerfile_key, dockerfile = "dockerFile", opt_str(raw, "dockerFile", path)
        context_key, context = "context", opt_str(raw, "context", path)
    else:
        dockerfile_key, dockerfile = "build.dockerfile", opt_str(section, "dockerfile", path, "build.")
        context_key, context = "build.context", opt_str(section, "context", path, "build.")
    if not dockerfile:
        raise ConfigError(
            f'{path}: "{dockerfile_key}" is missing',
            hint='Name the Dockerfile relative to devcontainer.json, e.g. "build": {"dockerfile": "Dockerfile"}.',
        )
    base = path.parent
    dockerfile_path = (base / dockerfile).resolve()
    if not dockerfile_path.is_file():
        raise ConfigError(
            f'{path}: "{dockerfile_key}" points at {dockerfile_path}, which is not a file',
            hint=f"Paths are relative to {base}; fix the path or create the Dockerfile.",
        )
    # Without a context the build runs in the Dockerfile's folder (devcontainers CLI behaviour).
    context_path = (base / context).resolve() if context else dockerfile_path.parent
    if not context_path.is_dir():
        raise ConfigError(
            f'{path}: "{context_key}" points at {context_path}, which is not a folder',
            hint=f"Paths are relative to {base}; fix the build context path.",
        )
    return BuildConfig(
        dockerfile=dockerfile_path,
        context=context_path,
        args=str_map(section, "args", path, "build."),
        target=opt_str(section, "target", path, "build.") or None,
    )


def _host_requirements(raw: dict[str, Any], path: Path, warnings: list[str]) -> HostRequirements:
    section = opt_dict(raw, "hostRequirements", path)
    cpus = section.get("cpus")
    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1):
        raise ConfigError(
            f'{path}: "hostRequirements.cpus" must be a whole number of at least 1',
            hint='Write it as a number, e.g. "cpus": 2.',
        )
    return HostRequirements(
        cpus=cpus,
        memory_bytes=_size(section, "memory", path),
        storage_bytes=_size(section, "storage", path),
        gpu=_gpu(section, path, warnings),
    )


def _gpu(section: dict[str, Any], path: Path, warnings: list[str]) -> GpuRequirement:
    """hostRequirements.gpu: true | false | "optional" | {cores, memory}.

    The object form asks for a GPU of some size. No backend devsy drives can measure a GPU's cores or memory (the
    Docker engine only says whether it has a GPU runtime), so the object means "a GPU is required": its fields are
    checked for form, and `devsy up` warns that their sizes are not verified.
    """
    value = section.get("gpu")
    if value is None:
        return GpuRequirement.UNSET
    if isinstance(value, bool):
        return GpuRequirement.REQUIRED if value else GpuRequirement.FALSE
    if value == "optional":
        return GpuRequirement.OPTIONAL
    if not isinstance(value, dict):
        raise ConfigError(
            f'{path}: "hostRequirements.gpu" must be true, false, "optional" or an object '
            f'{{"cores": N, "memory": "SIZE"}}, got {json_type_name(value)}',
            hint='Write "gpu": true (required), "gpu": "optional", or "gpu": {"cores": 1000, "memory": "8gb"}.',
        )
    cores = value.get("cores")
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or cores < 1):
        raise ConfigError(
            f'{path}: "hostRequirements.gpu.cores" must be a whole number of at least 1',
            hint='Write it as a number, e.g. "cores": 1000.',
        )
    _size(value, "memory", path, "hostRequirements.gpu.")
    unknown = sorted(set(value) - {"cores", "memory"})
    if unknown:
        raise ConfigError(
            f'{path}: "hostRequirements.gpu" has unknown properties: {", ".join(unknown)}',
            hint='The object form takes "cores" and "memory" only.',
        )
    sized = [f"gpu.{key}" for key in ("cores", "memory") if key in value]
    if sized:
        warnings.append(f"hostRequirements.{' and '.join(sized)} cannot be checked: devsy requires a GPU but does "
                        "not verify its size")
    return GpuRequirement.REQUIRED


def _size(section: dict[str, Any], key: str, path: Path, prefix: str = "hostRequirements.") -> int | None:
    value = section.get(key)
    if value is None:
        return None
    match = _SIZE.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ConfigError(
            f'{path}: "{prefix}{key}" must be a size such as "4gb" or "512mb"',
            hint="Use a whole number with an optional kb, mb, gb or tb suffix (units of 1024).",
        )
    unit = match.group(2)
    return int(match.group(1)) * (_UNITS[unit[0].lower()] if unit else 1)


def _default_devcontainer_id(local_folder: Path, config_path: Path) -> str:
    # The reference CLI's default id labels; a workspace passes its own (workspace_config.py).
    return devcontainer_id_for_labels({"devcontainer.local_folder": str(local_folder),
                                       "devcontainer.config_file": str(config_path)})
