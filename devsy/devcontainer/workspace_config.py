"""What a workspace's source means for the instance: its folder on the host, its config, its mount and owner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from devsy.devcontainer.config import DevContainerConfig, chosen_config, image_only_config, load_config
from devsy.devcontainer.config_secrets import register_config_secrets
from devsy.devcontainer.variables import devcontainer_id_for_labels
from devsy.driver.base import LABEL_WORKSPACE, Mount, MountType
from devsy.driver.reuse import MountPolicy
from devsy.errors import UsageError
from devsy.workspace.paths import WorkspacePaths
from devsy.workspace.source import Source


def host_folder(source: Source, paths: WorkspacePaths) -> Path:
    """The host folder bound into the instance: the user's own folder, or the content folder devsy manages."""
    return Path(source.value) if source.kind == "local" else paths.content


def load_workspace_config(source: Source, paths: WorkspacePaths, workspace_id: str,
                          config_file: str = "", local_env: Mapping[str, str] | None = None) -> DevContainerConfig:
    """The workspace's config; from here on its secrets are masked in everything this process prints (README).

    `config_file` is the file chosen with `--config` (relative to the workspace folder, or absolute) or the one the
    workspace's record remembers; empty: the folder's one devcontainer.json (config.find_config). `local_env` backs
    ${localEnv:...} (default: this process's environment; the SSH master passes its client's)."""
    if source.kind == "image":
        if config_file:
            raise UsageError(f"--config {config_file} needs a folder or git source; {source.value} is an image",
                             hint="drop --config, or give `devsy up` the folder that holds the config")
        config = image_only_config(source.value, workspace_id)
    else:
        folder = host_folder(source, paths)
        path = chosen_config(folder, config_file) if config_file else None
        # ${devcontainerId}: the reference's hash of the labels that find the instance, so stable across rebuilds.
        config = load_config(folder, config_path=path, env=local_env,
                             devcontainer_id=devcontainer_id_for_labels({LABEL_WORKSPACE: workspace_id}))
    register_config_secrets(config)
    return config


@dataclass(frozen=True)
class WorkspaceMount:
    mount: Mount
    policy: MountPolicy


def workspace_mount(config: DevContainerConfig, folder: Path, owner: str) -> WorkspaceMount:
    mount = config.workspace_mount or Mount(type=MountType.BIND, target=config.workspace_folder, source=str(folder))
    return WorkspaceMount(mount=mount, policy=MountPolicy(target=mount.target, read_only=mount.read_only, owner=owner))


def remote_user(config: DevContainerConfig, fallback: str) -> str:
    """remoteUser, else containerUser, else `fallback` (the recorded owner, or the image's user), else root."""
    return config.remote_user or config.container_user or fallback or "root"
