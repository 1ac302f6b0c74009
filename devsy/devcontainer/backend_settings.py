"""Before anything is created: what the chosen backend cannot do with this devcontainer.json's settings.

One check for every provider, read from its provider-table row: a required GPU the backend has none of is a
ConfigError; an optional one it has none of, each setting it ignores (MicroSandbox: capAdd, securityOpt,
privileged, init), and what the config itself could not act on are warnings, one each. A provider the host knows
nothing about (external:EXECUTABLE) decides about GPUs itself when it runs the instance.
runArgs options the Runtime Protocol has no field for (--add-host, --device, --shm-size) are a ConfigError for every
provider but the built-in Docker driver, rather than dropped on the way to the provider.
hostRequirements cpus/memory the backend's host cannot meet are a ConfigError here too, where the host can be
measured before the image is prepared (the driver checks again when it runs the instance, for every caller).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from devsy.devcontainer.config import DevContainerConfig
from devsy.driver.gpu import plan_gpu
from devsy.driver.host_minimums import HostCapacity, require_minimums
from devsy.driver.provider_table import row_for
from devsy.errors import ConfigError

# devcontainer.json key -> whether the config asks for something with it (unset or false asks for the default).
_ASKS: dict[str, Callable[[DevContainerConfig], bool]] = {
    "capAdd": lambda config: bool(config.cap_add),
    "securityOpt": lambda config: bool(config.security_opt),
    "privileged": lambda config: config.privileged is True,
    "init": lambda config: config.init is True,
}
# (kind, backend) of the rows whose driver applies runArgs that no protocol field carries: the built-in Docker driver.
_APPLIES_DOCKER_ONLY_RUN_ARGS = {("builtin", "docker")}


def _docker_capacity() -> HostCapacity:
    from devsy.driver.docker.container_spec import engine_capacity  # noqa: PLC0415 - docker only when used
    from devsy.driver.docker.engine import connect, engine_errors  # noqa: PLC0415

    client = connect()
    try:
        with engine_errors("reading the Docker engine's CPUs and memory (for hostRequirements)"):
            return engine_capacity(client.info())
    finally:
        client.close()


# (kind, backend) -> the capacity of the host its driver runs on, readable from here (external-docker runs on the
# host's engine too, as for GPUs); a row without one is checked by its driver alone.
_CAPACITY = {("builtin", "docker"): _docker_capacity, ("external", "docker"): _docker_capacity}
# Backends that check hostRequirements.cpus/memory as minimums but cannot see free disk space.
_STORAGE_UNCHECKED = {"docker": "the Docker engine does not report its free space"}


def backend_warnings(provider: str, options: Mapping[str, str], config: DevContainerConfig) -> list[str]:
    """The warnings `devsy up` gives for `config` on `provider`; ConfigError if the backend cannot run it at all."""
    row = row_for(provider)
    if config.docker_only_run_args and (row.kind, row.backend) not in _APPLIES_DOCKER_ONLY_RUN_ARGS:
        raise ConfigError(f"runArgs {', '.join(config.docker_only_run_args)} cannot be applied by provider "
                          f"{provider}: the Runtime Protocol has no field for them (only the built-in docker "
                          "provider applies them)",
                          hint="remove them from runArgs, or use --provider docker")
    req = config.host_requirements
    capacity = _CAPACITY.get((row.kind, row.backend))
    if capacity is not None and (req.cpus or req.memory_bytes):
        require_minimums(req, capacity())
    warnings = list(config.warnings)
    if config.host_requirements.storage_bytes and row.backend in _STORAGE_UNCHECKED:
        warnings.append(f"hostRequirements.storage is not checked: {_STORAGE_UNCHECKED[row.backend]}")
    if row.gpu is not None:
        source = row.gpu
        plan = plan_gpu(config.host_requirements.gpu, lambda: source.available(row.parse_options(options)),
                        source.where)
        if plan.warning:
            warnings.append(plan.warning)
    for name in row.ignored_settings:
        if _ASKS[name](config):
            warnings.append(f'"{name}" in devcontainer.json has no effect: {row.ignored_because}')
    return warnings
