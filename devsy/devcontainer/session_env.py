"""remoteEnv for what runs in an instance: `devsy exec`, `devsy ssh` sessions and lifecycle hooks.

The values are never stored by devsy: every session re-reads devcontainer.json (as the reference CLI's `exec` does),
so a remoteEnv that holds a secret is not copied into the workspace record. ${containerEnv:...} is resolved from the
instance's own environment, read once per command and only when the config refers to it (it costs an exec).
Under remoteEnv a session gets userEnvProbe's result, which `up` stored (user_env_probe.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from devsy.devcontainer.config import DevContainerConfig, resolve_container_env
from devsy.devcontainer.config_secrets import register_config_secrets
from devsy.devcontainer.instance_env import read_instance_env
from devsy.devcontainer.lifecycle_commands import LifecycleCommand
from devsy.devcontainer.user_env_probe import stored_user_env
from devsy.devcontainer.workspace_config import load_workspace_config
from devsy.driver.base import Driver, ExecRequest
from devsy.errors import ConfigError
from devsy.progress import Progress
from devsy.workspace.paths import WorkspacePaths
from devsy.workspace.record import WorkspaceRecord

# The name of the SSH env request that asks the guest agent to unset names (newline-separated) in a session.
UNSET_REQUEST = "DEVSY_UNSET_ENV"
# The guest agent's variable carrying its sessions' remoteEnv when the SSH client is OpenSSH (agent/guest/process.py).
SESSION_ENV = "DEVSY_SESSION_ENV"


@dataclass(frozen=True)
class SessionEnv:
    """What a session's environment gets on top of the instance's: `values` set, `unset` removed."""

    values: dict[str, str]
    unset: tuple[str, ...] = ()

    def under(self, explicit: dict[str, str]) -> dict[str, str]:
        """These values with `explicit` ones (`--env`) winning; an explicit value also overrides a null."""
        return {**self.values, **explicit}

    def unset_beside(self, explicit: dict[str, str]) -> tuple[str, ...]:
        return tuple(name for name in self.unset if name not in explicit)


def session_env(config: DevContainerConfig) -> SessionEnv:
    return SessionEnv(dict(config.remote_env), tuple(config.remote_env_unset))


def workspace_session_env(record: WorkspaceRecord, paths: WorkspacePaths, driver: Callable[[], Driver],
                          user: str = "", *, local_env: Mapping[str, str] | None = None,
                          warn: Callable[[str], None] | None = None) -> SessionEnv:
    """The remoteEnv a session of the workspace as `user` (default: the remote user) gets, from its devcontainer.json
    as it is now; `driver` is asked for only when ${containerEnv:...} needs the instance's environment. The SSH
    master, which serves other processes, passes the caller's environment (for ${localEnv:...}) and where its
    warning goes (default: this process's stderr)."""
    try:
        config = load_workspace_config(record.source, paths, record.id, record.config_path, local_env)
    except ConfigError as exc:
        # The instance is still the developer's (a failed `up` keeps it, catalogue failure-cleanup): an edit that
        # broke devcontainer.json, or a project folder that is gone, must not lock them out of their workspace.
        # The session runs without remoteEnv, and says so once.
        (warn or Progress().warn)(f"remoteEnv is not applied to this session: {exc.message}")
        return SessionEnv({})
    if config.substituted is not None:
        config = in_instance(driver(), record.id, config)
    env = session_env(config)
    # A remoteEnv null removes a probed variable too: the guest agent sets the values after removing the nulls.
    probed = {name: value for name, value in stored_user_env(record, config.user_env_probe, user).items()
              if name not in env.unset}
    return SessionEnv({**probed, **env.values}, env.unset)


def ssh_env(env: SessionEnv, explicit: dict[str, str]) -> dict[str, str]:
    """The env requests of an SSH session: the values, and the names to unset under UNSET_REQUEST (the guest agent
    removes them: an SSH env request cannot unset)."""
    unset = env.unset_beside(explicit)
    return {**env.under(explicit), **({UNSET_REQUEST: "\n".join(unset)} if unset else {})}


def in_instance(driver: Driver, workspace_id: str, config: DevContainerConfig) -> DevContainerConfig:
    """`config` as it applies inside the running instance: ${containerEnv:...} resolved, and remoteEnv's nulls
    unset for every lifecycle hook in the guest (through `env -u`, which only a null asks for)."""
    if config.substituted is not None:
        config = resolve_container_env(config, read_instance_env(driver, workspace_id, "${containerEnv:...} in devcontainer.json"))
        register_config_secrets(config)  # the resolved values are what sessions and hooks are given
    if not config.remote_env_unset:
        return config
    changes: dict[str, object] = {
        f.name: _unsetting(value, config.remote_env_unset) for f in dataclasses.fields(config)
        if isinstance(value := getattr(config, f.name), LifecycleCommand) and value.name != "initializeCommand"}
    changes["feature_hooks"] = {name: tuple(_unsetting(c, config.remote_env_unset) for c in commands)
                                for name, commands in config.feature_hooks.items()}  # Features' commands too
    return dataclasses.replace(config, **changes)


def unset_argv(argv: list[str], names: tuple[str, ...] | list[str]) -> list[str]:
    """`argv` run with `names` removed from its environment."""
    if not names:
        return argv
    return ["env", *(arg for name in names for arg in ("-u", name)), "--", *argv]


def agent_session_env(env: SessionEnv) -> dict[str, str]:
    """The agent's launch environment that gives every session of it `env` (empty when there is nothing to give)."""
    if not env.values and not env.unset:
        return {}
    return {SESSION_ENV: json.dumps({"set": env.values, "unset": list(env.unset)})}


def apply_to_exec(request: ExecRequest, env: SessionEnv) -> None:
    """Give a `devsy exec` request the session environment; its own --env values win."""
    unset = env.unset_beside(request.env)
    request.env = env.under(request.env)
    request.argv = unset_argv(request.argv, unset)


def _unsetting(command: LifecycleCommand, names: list[str]) -> LifecycleCommand:
    return dataclasses.replace(command, commands=tuple((label, unset_argv(argv, names))
                                                       for label, argv in command.commands))
