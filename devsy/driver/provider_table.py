"""The provider table: one row per `--provider` value. The CLI, the runner (registry.py) and the harness read it.

Adding a provider means adding a row (or `register()`-ing one). Rows hold callables, not imports: a row's driver,
grpc or msb modules load only when that provider is used, so `devsy --help` and `devsy delete` touch no other
provider's code.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devsy.errors import UsageError

if TYPE_CHECKING:
    from devsy.driver.base import Driver

KINDS = ("builtin", "external", "remote")
# The option that declares an `external:EXECUTABLE` provider's arguments (devsy/driver/external/args.py splits it).
ARGS_OPTION = "ARGS"
# The subcommand devsy's own provider executables declare (devsy.runtime.wire.constants.SERVE_ARG; not imported here:
# reading the table must not load the runtime package).
SERVE_ARG = "serve"

# Where the devcontainer's image is prepared before the driver runs it (image_prepare.py always uses the host engine).
IMAGES_HOST_DOCKER = "host Docker engine"
IMAGES_LOADED_INTO_MSB = "builds and local images: host Docker engine, then loaded into msb; registry images: msb pull"

# The devcontainer.json settings a microVM cannot apply: its own kernel already isolates it (devsy/devcontainer/
# backend_settings.py says which of them a config sets).
MICROVM_IGNORED = ("capAdd", "securityOpt", "privileged", "init")
MICROVM_IGNORED_BECAUSE = ("MicroSandbox ignores it (a microVM is already isolated by its own kernel, so "
                           "container-runtime settings do not apply)")

# Parsed options -> the network mode image builds on the host engine use.
NetworkMode = Callable[[Any], str]
# (provider name, raw options, parsed options) -> a driver that has contacted nothing yet.
DriverFactory = Callable[[str, Mapping[str, str], Any], "Driver"]


@dataclass(frozen=True)
class GpuSource:
    """Whether a backend can give GPUs: `available(parsed options)` may ask it; `where` names it in messages."""

    where: str
    available: Callable[[Any], bool]


@dataclass(frozen=True)
class ProviderRow:
    """One provider: how `--provider NAME` is validated, which driver it makes, and what the docs say about it."""

    name: str  # the `--provider` value; for a pattern row, the prefix its values start with
    kind: str  # builtin | external | remote
    backend: str  # what runs the workspace: docker | microsandbox | any (for a pattern row) | ...
    description: str  # one line for `devsy up --help` and the docs
    parse_options: Callable[[Mapping[str, str]], Any]  # validates; raises UsageError naming the option
    make: DriverFactory
    network_mode: NetworkMode
    images: str = IMAGES_HOST_DOCKER
    # The backend pulls a registry image itself (the host's engine must not hold it); the host reads only its config.
    pulls_registry_images: bool = False
    executable: str = ""  # external rows: the provider executable devsy launches (a pattern row: from the name)
    # External rows: the arguments it is launched with, exactly (the protocol has no `serve` convention; devsy's
    # own providers declare theirs). A pattern row declares none: the user's ARGS option gives them.
    args: tuple[str, ...] = ()
    pattern: bool = False  # `name` is a prefix (external:EXECUTABLE)
    connects_early: bool = True  # make_driver(connect=True) opens the backend before any state is touched
    synopsis: str = ""  # how --help writes it, when that differs from `name`
    # devcontainer.json settings the backend cannot apply: `devsy up` warns once for each one a config sets.
    ignored_settings: tuple[str, ...] = ()
    ignored_because: str = ""  # completes the warning: '"capAdd" in devcontainer.json has no effect: ...'
    # None: the provider alone decides about hostRequirements.gpu when it runs the instance (the host cannot know).
    gpu: GpuSource | None = None

    @property
    def label(self) -> str:
        return self.synopsis or self.name

    def matches(self, name: str) -> bool:
        return name.startswith(self.name) if self.pattern else name == self.name

    def executable_for(self, name: str) -> str:
        """The provider executable `--provider name` runs (external rows only)."""
        if not self.pattern:
            return self.executable
        executable = name[len(self.name):]
        if not executable:
            raise UsageError(f"--provider {self.name} needs an executable", hint=f"use {self.name}/path/to/provider")
        return executable


# -- option parsers and driver factories (imports deferred: only the chosen provider's modules load) ------------------

def _docker_options(raw: Mapping[str, str]) -> Any:
    from devsy.driver.docker.options import parse_docker_options  # noqa: PLC0415

    return parse_docker_options(raw)


def _msb_options(raw: Mapping[str, str]) -> Any:
    from devsy.driver.microsandbox.options import parse_microsandbox_options  # noqa: PLC0415

    return parse_microsandbox_options(raw)


def _remote_options(raw: Mapping[str, str]) -> Any:
    from devsy.driver.remote.config import parse_remote_options  # noqa: PLC0415

    return parse_remote_options(raw)  # reads and checks the provider config file; contacts nothing


def passthrough_options(raw: Mapping[str, str]) -> Mapping[str, str]:
    """Options of a provider devsy does not know: the provider validates them itself."""
    return raw


def _declared_options(raw: Mapping[str, str]) -> Mapping[str, str]:
    """`external:EXECUTABLE`'s options: ARGS must split into arguments; the rest pass through unvalidated."""
    from devsy.driver.external.args import declared_args  # noqa: PLC0415

    if ARGS_OPTION in raw:
        declared_args(raw[ARGS_OPTION])
    return raw


def _docker_driver(name: str, raw: Mapping[str, str], parsed: Any) -> Driver:
    from devsy.driver.docker.driver import DockerDriver  # noqa: PLC0415

    return DockerDriver(parsed)


def _msb_driver(name: str, raw: Mapping[str, str], parsed: Any) -> Driver:
    from devsy.driver.microsandbox.driver import MicrosandboxDriver  # noqa: PLC0415

    return MicrosandboxDriver(parsed)


def _docker_has_gpu(parsed: Any) -> bool:
    from devsy.driver.docker.container_spec import engine_has_gpu  # noqa: PLC0415
    from devsy.driver.docker.engine import connect, engine_errors  # noqa: PLC0415

    client = connect()
    try:
        with engine_errors("reading the Docker engine's runtimes (for hostRequirements.gpu)"):
            return engine_has_gpu(client.info())
    finally:
        client.close()


_DOCKER_GPU = GpuSource("this Docker engine", _docker_has_gpu)  # external-docker runs on the host's engine too
_NO_GPU = GpuSource("MicroSandbox", lambda parsed: False)  # msb offers no GPU passthrough


def _remote_driver(name: str, raw: Mapping[str, str], parsed: Any) -> Driver:
    from devsy.driver.remote.driver import RemoteDriver  # noqa: PLC0415

    return RemoteDriver(parsed)


def external_driver(name: str, raw: Mapping[str, str], parsed: Any) -> Driver:
    """A Runtime Protocol provider process (launched on first use); options travel as its environment."""
    from devsy.driver.external.driver import ExternalDriver  # noqa: PLC0415 - grpc only for external providers
    from devsy.driver.external.providers import command_of  # noqa: PLC0415

    return ExternalDriver(name, command_of(row_for(name), name, raw))


def locate(executable: str) -> str:
    """Our own console scripts live next to the interpreter; a venv need not be on PATH for devsy to find them."""
    sibling = Path(sys.executable).parent / executable
    return str(sibling) if sibling.exists() else (shutil.which(executable) or executable)


def _docker_network(parsed: Any) -> str:
    return str(parsed.network_mode)


def _default_network(parsed: Any) -> str:
    return "default"  # msb and remote options have no network mode for host-side builds


def option_network(parsed: Mapping[str, str]) -> str:
    """An unknown provider's NETWORK_MODE option, if it has one (passed through unvalidated)."""
    return parsed.get("NETWORK_MODE", "default") or "default"


_ROWS: list[ProviderRow] = [
    ProviderRow("docker", "builtin", "docker", "the built-in Docker driver (options: NETWORK_MODE, STOP_TIMEOUT)",
                _docker_options, _docker_driver, _docker_network, gpu=_DOCKER_GPU),
    ProviderRow("microsandbox", "builtin", "microsandbox", "the built-in MicroSandbox driver (microVMs run by msb)",
                _msb_options, _msb_driver, _default_network, images=IMAGES_LOADED_INTO_MSB,
                pulls_registry_images=True, ignored_settings=MICROVM_IGNORED,
                ignored_because=MICROVM_IGNORED_BECAUSE, gpu=_NO_GPU),
    ProviderRow("external-docker", "external", "docker",
                "the Docker driver as a Runtime Protocol v1 executable, devsy-provider-docker (same options)",
                _docker_options, external_driver, _docker_network, executable="devsy-provider-docker",
                args=(SERVE_ARG,), gpu=_DOCKER_GPU),
    ProviderRow("external-microsandbox", "external", "microsandbox",
                "the MicroSandbox driver as a Runtime Protocol v1 executable, devsy-provider-microsandbox "
                "(same options)",
                _msb_options, external_driver, _default_network, images=IMAGES_LOADED_INTO_MSB,
                pulls_registry_images=True, executable="devsy-provider-microsandbox", args=(SERVE_ARG,),
                ignored_settings=MICROVM_IGNORED, ignored_because=MICROVM_IGNORED_BECAUSE, gpu=_NO_GPU),
    ProviderRow("remote", "remote", "docker",
                "a backend on another machine, reached through its exec command (PROVIDER_CONFIG=provider.yaml)",
                _remote_options, _remote_driver, _default_network, connects_early=False),
    ProviderRow("external:", "external", "any",
                "any Runtime Protocol v1 provider executable, launched with exactly the arguments "
                f"{ARGS_OPTION}='...' declares (shell-style quoting; none by default); other options pass through "
                "unvalidated as its environment",
                _declared_options, external_driver, option_network, pattern=True, synopsis="external:EXECUTABLE"),
]

DEFAULT_PROVIDER = "docker"


def provider_rows() -> tuple[ProviderRow, ...]:
    """Every row, in table order (named rows before the pattern rows that catch the rest)."""
    return tuple(sorted(_ROWS, key=lambda row: row.pattern))


def register(row: ProviderRow) -> None:
    """Add a provider row (a plugin or a test); its name must not be taken."""
    if any(existing.name == row.name for existing in _ROWS):
        raise ValueError(f"a provider row named {row.name!r} exists already")
    _ROWS.append(row)


def unregister(name: str) -> None:
    _ROWS[:] = [row for row in _ROWS if row.name != name]


def row_for(name: str) -> ProviderRow:
    """The row `--provider name` selects, or a UsageError listing the providers there are."""
    for row in provider_rows():
        if row.matches(name):
            return row
    raise UsageError(f"unknown provider {name!r}", hint=f"use one of: {', '.join(labels())}")


def labels() -> list[str]:
    return [row.label for row in provider_rows()]


def help_text() -> str:
    """The `devsy up --provider` help: every row and its one-line description."""
    rows = "; ".join(f"{row.label} = {row.description}" for row in provider_rows())
    return f"backend provider (default: the workspace's, else {DEFAULT_PROVIDER}): {rows}"
