"""Which values of a devcontainer.json are secrets of everything devsy prints (README.md, "Secrets")."""

from __future__ import annotations

from devsy.devcontainer.config import DevContainerConfig
from devsy.redaction import register_secrets


def config_secrets(config: DevContainerConfig) -> list[str]:
    """The values devsy passes on (containerEnv, remoteEnv, build args) and the sources of the extra mounts.

    The workspace mount's source is the user's own project folder, named in many useful messages; it is not one."""
    return [*config.container_env.values(), *config.remote_env.values(),
            *(config.build.args.values() if config.build else ()), *(m.source for m in config.mounts if m.source)]


def register_config_secrets(config: DevContainerConfig) -> None:
    """Mask `config_secrets(config)` in everything this process prints from now on."""
    register_secrets(config_secrets(config))
