"""`devsy-provider-docker serve`: the built-in Docker driver served over Runtime Protocol v1.

Provider options arrive as environment variables named like the built-in provider's options (NETWORK_MODE,
STOP_TIMEOUT): the host puts `--provider-option KEY=VALUE` into the provider's environment, which travels through
the supervisor's config pipe (never argv or disk). DOCKER_HOST selects the engine as usual. ReusePreflight and ON_RUN
replacement (RunImage with allow_recreate) are supported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

import devsy.no_docker_ssh_transport  # noqa: F401  (first: before anything imports docker)
from devsy.driver.docker.options import OPTION_HELP, DockerOptions, parse_docker_options
from devsy.errors import DevsyError
from devsy.process_exit import skip_final_collection
from devsy.runtime.sdk import ProviderInfo, require_serve_command, serve_deferred

PROG = "devsy-provider-docker"


def provider_options(environ: Mapping[str, str]) -> dict[str, str]:
    """The documented Docker provider options present in `environ` (other variables are not options)."""
    return {name: environ[name] for name in OPTION_HELP if name in environ}


def _load(options: DockerOptions):
    """After the handshake line: the driver and the engine's version for Info (the SDK waits for a call that changes
    something: devsy/driver/docker/engine_reader.py)."""
    from devsy.providers.docker_driver import DockerProviderDriver, engine_version
    from devsy.version import devsy_version

    driver = DockerProviderDriver(options)
    info = ProviderInfo(driver_name="docker", driver_version=devsy_version(), runtime_name="docker",
                        runtime_version=engine_version(driver), recreate_on_run=True)
    return driver, info


def main(argv: list[str] | None = None) -> int:
    rest = require_serve_command(PROG, sys.argv[1:] if argv is None else argv)
    if rest:
        print(f"{PROG}: unexpected arguments; options come from the environment ({', '.join(OPTION_HELP)})",
              file=sys.stderr)
        return 2
    try:
        options = parse_docker_options(provider_options(os.environ))  # a bad option exits before the handshake
    except DevsyError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    code = serve_deferred(lambda: _load(options))
    skip_final_collection()  # this process ends now, and its host waits for that
    return code


if __name__ == "__main__":
    sys.exit(main())
