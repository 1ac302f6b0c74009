"""Connecting to the Docker engine and turning SDK failures into devsy's typed errors.

The SDK is imported when a client is made, not with this module: a command that only looks at the engine reads it
without the SDK (engine_reader.py), and its ~85 ms import would be most of such a command.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from devsy.driver.base import Mount
from devsy.errors import BackendUnavailable, ConfigError, DriverError, ImageError, NotFound

if TYPE_CHECKING:
    import docker
    import docker.errors

# Engine calls that are not streams must answer within this many seconds.
API_TIMEOUT_S = 120
# Engine messages that quote what devsy must not repeat: a mount's source path (may be a secret) and a line of the
# file named as Dockerfile (may be any file). The rest of the message stays, so the cause is still said.
_QUOTING_MESSAGES = (
    (re.compile(r"(bind source path does not exist)\s*:.*", re.IGNORECASE), r"\1 on the engine's host"),
    (re.compile(r"(error while creating mount source path)\s*'[^']*'", re.IGNORECASE), r"\1"),
    (re.compile(r"(dockerfile parse error(?: on)? line \d+)\s*:\s*([^:]*):.*", re.IGNORECASE | re.DOTALL),
     r"\1: \2 (the line is not repeated)"),
)


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


def connect() -> docker.DockerClient:
    """A client for the engine named by DOCKER_HOST (or the default socket); BackendUnavailable if none answers."""
    import docker  # noqa: PLC0415 - see the module docstring

    try:
        return docker.from_env(timeout=API_TIMEOUT_S)
    except docker.errors.DockerException as exc:
        raise unavailable(exc) from exc


def unavailable(cause: Exception | str, action: str = "") -> BackendUnavailable:
    """The engine cannot be used: `cause` (an exception, or what the engine answered) says why."""
    why = cause if isinstance(cause, str) else _first_line(cause)
    return BackendUnavailable(
        f"{action + ': ' if action else ''}cannot reach the Docker engine at {engine_address()}: {why}",
        hint="start the Docker daemon (for example `dockerd` or `systemctl start docker`) or point DOCKER_HOST "
        "at a running engine, then retry",
    )


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextlib.contextmanager
def engine_errors(action: str, mounts: Sequence[Mount] = ()) -> Iterator[None]:
    """Map SDK exceptions raised while doing `action` to typed errors (NotFound, BackendUnavailable, DriverError).
    `mounts`: the mounts of a container being created, so an engine message about one names it by its target."""
    try:
        yield
    except Exception as exc:
        mapped = _typed_error(exc, action, mounts)
        if mapped is None:
            raise
        raise mapped from exc


def _typed_error(exc: Exception, action: str, mounts: Sequence[Mount]) -> Exception | None:
    """The typed error for an SDK exception; None for any other exception (it propagates as it is)."""
    if "docker.errors" not in sys.modules:
        return None  # no SDK call was made, so it raised nothing of its own (and we need not import it to tell)
    import docker.errors  # noqa: PLC0415 - loaded already
    import requests.exceptions  # noqa: PLC0415

    if isinstance(exc, docker.errors.ImageNotFound):
        return ImageError(f"{action}: image not found: {_explanation(exc)}")
    if isinstance(exc, docker.errors.NotFound):
        return NotFound(f"{action}: {_explanation(exc)}")
    if isinstance(exc, docker.errors.APIError):
        missing = _missing_bind_source(exc, mounts)
        return missing if missing is not None else DriverError(f"{action}: {_explanation(exc)}")
    if isinstance(exc, (requests.exceptions.ConnectionError, docker.errors.DockerException)):
        return unavailable(exc, action)
    return None


def _missing_bind_source(exc: docker.errors.APIError, mounts: Sequence[Mount]) -> ConfigError | None:
    """The engine's "bind source path does not exist: SOURCE" as a config error naming the mount by its target.
    Only the engine can tell: its host, not ours, resolves bind sources (DOCKER_HOST, a remote machine)."""
    text = str(getattr(exc, "explanation", "") or "")
    if "bind source path does not exist" not in text.lower():
        return None
    targets = [m.target for m in mounts if m.source and m.source in text]
    which = f"the bind mount at {targets[0]}" if targets else "a bind mount"
    return ConfigError(f"{which} has a source that does not exist on the Docker engine's host",
                       hint="create the source folder, or fix that mount's source in devcontainer.json "
                            "(mounts / workspaceMount)")


def _explanation(exc: docker.errors.APIError | docker.errors.DockerException) -> str:
    explanation = getattr(exc, "explanation", None)
    return engine_message(str(explanation) if explanation else _first_line(exc))


def engine_message(text: str) -> str:
    """An engine's message as devsy may show it: the parts that quote mount sources or Dockerfile lines removed."""
    for pattern, replacement in _QUOTING_MESSAGES:
        text = pattern.sub(replacement, text)
    return text
