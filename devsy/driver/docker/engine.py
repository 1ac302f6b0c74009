"""Connecting to the Docker engine and turning SDK failures into devsy's typed errors."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import docker
import docker.errors
import requests.exceptions

from devsy.errors import BackendUnavailable, DriverError, ImageError, NotFound

# Engine calls that are not streams must answer within this many seconds.
API_TIMEOUT_S = 120


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


def connect() -> docker.DockerClient:
    """A client for the engine named by DOCKER_HOST (or the default socket); BackendUnavailable if none answers."""
    try:
        return docker.from_env(timeout=API_TIMEOUT_S)
    except docker.errors.DockerException as exc:
        raise _unavailable(exc) from exc


def _unavailable(exc: Exception) -> BackendUnavailable:
    return BackendUnavailable(
        f"cannot reach the Docker engine at {engine_address()}: {_first_line(exc)}",
        hint="start the Docker daemon (for example `dockerd` or `systemctl start docker`) or point DOCKER_HOST "
        "at a running engine, then retry",
    )


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextlib.contextmanager
def engine_errors(action: str) -> Iterator[None]:
    """Map SDK exceptions raised while doing `action` to typed errors (NotFound, BackendUnavailable, DriverError)."""
    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise ImageError(f"{action}: image not found: {_explanation(exc)}") from exc
    except docker.errors.NotFound as exc:
        raise NotFound(f"{action}: {_explanation(exc)}") from exc
    except (requests.exceptions.ConnectionError, docker.errors.DockerException) as exc:
        if isinstance(exc, docker.errors.APIError):
            raise DriverError(f"{action}: {_explanation(exc)}") from exc
        raise _unavailable(exc) from exc


def _explanation(exc: docker.errors.APIError | docker.errors.DockerException) -> str:
    explanation = getattr(exc, "explanation", None)
    return str(explanation) if explanation else _first_line(exc)
