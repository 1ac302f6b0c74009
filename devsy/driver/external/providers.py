"""Which external providers `--provider` can name, and how their options reach them.

`external-docker` runs devsy-provider-docker (the built-in Docker driver behind the protocol; same options);
`external-microsandbox` runs devsy-provider-microsandbox (the built-in MicroSandbox driver; same options);
`external:EXECUTABLE` runs any provider executable (Python- or Go-built), passing options through unvalidated.
Options travel as environment variables of the provider (KEY=VALUE), through the supervisor's config pipe.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from devsy.errors import UsageError
from devsy.runtime.launcher import ProviderCommand

EXTERNAL_PREFIX = "external:"
KNOWN = {"external-docker": "devsy-provider-docker", "external-microsandbox": "devsy-provider-microsandbox"}


def is_external(name: str) -> bool:
    return name in KNOWN or name.startswith(EXTERNAL_PREFIX)


def _locate(executable: str) -> str:
    # Our own console scripts live next to the interpreter; a venv need not be on PATH for devsy to find them.
    sibling = Path(sys.executable).parent / executable
    return str(sibling) if sibling.exists() else (shutil.which(executable) or executable)


def validate_options(name: str, options: Mapping[str, str]) -> None:
    if name == "external-docker":
        from devsy.driver.docker.options import parse_docker_options  # noqa: PLC0415

        parse_docker_options(options)
    elif name == "external-microsandbox":
        from devsy.driver.microsandbox.options import parse_microsandbox_options  # noqa: PLC0415

        parse_microsandbox_options(options)  # refused here, before a provider process or any state exists
    elif name.startswith(EXTERNAL_PREFIX) and not name[len(EXTERNAL_PREFIX):]:
        raise UsageError("--provider external: needs an executable", hint="use external:/path/to/provider")


def provider_command(name: str, options: Mapping[str, str]) -> ProviderCommand:
    validate_options(name, options)
    executable = KNOWN.get(name) or name[len(EXTERNAL_PREFIX):]
    return ProviderCommand(binary=_locate(executable), env=dict(options))


def network_mode(name: str, options: Mapping[str, str]) -> str:
    """The network mode image builds on the host engine should use (the Docker provider's NETWORK_MODE)."""
    if name == "external-docker":
        from devsy.driver.docker.options import parse_docker_options  # noqa: PLC0415

        return parse_docker_options(options).network_mode
    if name == "external-microsandbox":
        return "default"  # as for the built-in driver: msb options have no network mode for host-side builds
    return options.get("NETWORK_MODE", "default") or "default"
