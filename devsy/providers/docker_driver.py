"""The Docker driver as devsy-provider-docker serves it: the built-in DockerDriver plus the Preflight hook.

Its own module because importing it imports the docker SDK: docker.py loads it only after the handshake line.
"""

from __future__ import annotations

from devsy.driver.docker.driver import DockerDriver
from devsy.errors import BackendUnavailable, DevsyError


class DockerProviderDriver(DockerDriver):
    """DockerDriver plus the Preflight hook the SDK calls: is the engine reachable?"""

    def preflight(self, disable_auto_start: bool = False) -> None:
        try:
            self.client.ping()
        except DevsyError:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDK's transport errors, named in the message
            raise BackendUnavailable(f"the Docker engine does not answer: {type(exc).__name__}",
                                     hint="start the Docker daemon or point DOCKER_HOST at a running engine") from exc


def engine_version(driver: DockerDriver) -> str:
    try:
        return str(driver.client.version().get("Version", ""))
    except Exception:  # noqa: BLE001 - informational only; Preflight reports an unreachable engine properly
        return ""
