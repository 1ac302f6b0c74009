"""The Docker driver as devsy-provider-docker serves it: the built-in DockerDriver plus the Preflight hook.

Its own module because importing it imports devsy's Docker driver: docker.py loads it only after the handshake line.
The SDK itself waits for the first call that changes something (devsy/driver/docker/engine.py): Info, Preflight
and Find read a local engine without it.
"""

from __future__ import annotations

from devsy.driver.docker.driver import DockerDriver
from devsy.errors import BackendUnavailable, DevsyError


class DockerProviderDriver(DockerDriver):
    """DockerDriver plus the Preflight hook the SDK calls: is the engine reachable?"""

    def preflight(self, disable_auto_start: bool = False) -> None:
        try:
            self.open_backend()
        except DevsyError:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDK's transport errors, named in the message
            raise BackendUnavailable(f"the Docker engine does not answer: {type(exc).__name__}",
                                     hint="start the Docker daemon or point DOCKER_HOST at a running engine") from exc


def engine_version(driver: DockerDriver) -> str:
    try:
        return driver.engine_version()
    except Exception:  # noqa: BLE001 - informational only; Preflight reports an unreachable engine properly
        return ""
