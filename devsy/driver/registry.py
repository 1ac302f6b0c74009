"""Provider name -> driver. The runner asks for a driver by the name stored in the workspace record."""

from __future__ import annotations

from collections.abc import Mapping

from devsy.driver.base import Driver
from devsy.errors import UsageError

BUILTIN_PROVIDERS = ("docker", "microsandbox")
DEFAULT_PROVIDER = "docker"


def validate_provider(name: str, options: Mapping[str, str]) -> None:
    """Check the provider name and its options before anything is created."""
    make_driver(name, options, connect=False)


def make_driver(name: str, options: Mapping[str, str], *, connect: bool = True) -> Driver:
    from devsy.driver.external import providers as external  # noqa: PLC0415 - grpc only for external providers

    if external.is_external(name):
        from devsy.driver.external.driver import ExternalDriver  # noqa: PLC0415

        external_driver = ExternalDriver(name, external.provider_command(name, options))  # validates the options
        if connect:
            external_driver.client  # noqa: B018 - launch and validate Info before any state is touched
        return external_driver
    if name == "docker":
        from devsy.driver.docker.driver import DockerDriver
        from devsy.driver.docker.options import parse_docker_options

        driver = DockerDriver(parse_docker_options(options))
        if connect:
            driver.client  # noqa: B018 - fail early with BackendUnavailable, before any state is touched
        return driver
    if name == "microsandbox":
        from devsy.driver.microsandbox.driver import MicrosandboxDriver
        from devsy.driver.microsandbox.options import parse_microsandbox_options

        msb_driver = MicrosandboxDriver(parse_microsandbox_options(options))
        if connect:
            msb_driver.client  # noqa: B018 - find msb and check its version before any state is touched
        return msb_driver
    if name == "remote":
        from devsy.driver.remote.driver import RemoteDriver  # noqa: PLC0415 - only for remote machine providers

        return RemoteDriver.from_options(options)  # validates its provider config; contacts nothing until used
    known = ", ".join([*BUILTIN_PROVIDERS, *external.KNOWN])
    raise UsageError(f"unknown provider {name!r}",
                     hint=f"use one of: {known}, remote (with PROVIDER_CONFIG), or external:EXECUTABLE")


def network_mode_of(name: str, options: Mapping[str, str]) -> str:
    """The network mode image builds on the host engine should use for this provider."""
    if name == "docker":
        from devsy.driver.docker.options import parse_docker_options

        return parse_docker_options(options).network_mode
    from devsy.driver.external import providers as external  # noqa: PLC0415

    if external.is_external(name):
        return external.network_mode(name, options)
    return "default"
