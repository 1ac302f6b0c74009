"""Provider name -> driver. The runner asks for a driver by the name stored in the workspace record."""

from __future__ import annotations

from collections.abc import Mapping

from devsy.driver.base import Driver
from devsy.errors import UsageError

BUILTIN_PROVIDERS = ("docker",)
DEFAULT_PROVIDER = "docker"


def validate_provider(name: str, options: Mapping[str, str]) -> None:
    """Check the provider name and its options before anything is created."""
    make_driver(name, options, connect=False)


def make_driver(name: str, options: Mapping[str, str], *, connect: bool = True) -> Driver:
    if name == "docker":
        from devsy.driver.docker.driver import DockerDriver
        from devsy.driver.docker.options import parse_docker_options

        driver = DockerDriver(parse_docker_options(options))
        if connect:
            driver.client  # noqa: B018 - fail early with BackendUnavailable, before any state is touched
        return driver
    raise UsageError(f"unknown provider {name!r}", hint=f"use one of: {', '.join(BUILTIN_PROVIDERS)}")


def network_mode_of(name: str, options: Mapping[str, str]) -> str:
    """The network mode image builds on the host engine should use for this provider."""
    if name == "docker":
        from devsy.driver.docker.options import parse_docker_options

        return parse_docker_options(options).network_mode
    return "default"
