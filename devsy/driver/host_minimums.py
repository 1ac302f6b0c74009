"""hostRequirements as the spec means them: minimums the host must offer, checked before anything is created.

A backend that runs workspaces side by side on one machine (Docker) compares them with what that machine has; it
never turns them into limits. A backend that sizes a machine per workspace (MicroSandbox) uses them as that size.
"""

from __future__ import annotations

from dataclasses import dataclass

from devsy.driver.base import HostRequirements
from devsy.errors import ConfigError

_GIB = 2**30


@dataclass(frozen=True)
class HostCapacity:
    """What the backend's host can give one workspace; None = the backend does not say."""

    where: str  # names the host in messages, e.g. "this Docker engine"
    cpus: int | None
    memory_bytes: int | None


def require_minimums(req: HostRequirements, capacity: HostCapacity) -> None:
    """ConfigError naming the first hostRequirements field the host cannot meet."""
    if req.cpus and capacity.cpus is not None and req.cpus > capacity.cpus:
        raise _unmet("cpus", f"{req.cpus} CPUs", f"{capacity.cpus}", capacity.where)
    if req.memory_bytes and capacity.memory_bytes is not None and req.memory_bytes > capacity.memory_bytes:
        raise _unmet("memory", _size(req.memory_bytes), _size(capacity.memory_bytes), capacity.where)


def _unmet(key: str, needs: str, has: str, where: str) -> ConfigError:
    return ConfigError(f'"hostRequirements.{key}": the devcontainer needs {needs}, {where} has {has}',
                       hint=f"lower hostRequirements.{key} in devcontainer.json, or run it with a provider whose "
                            "host has more")


def _size(value: int) -> str:
    return f"{value / _GIB:.1f} GiB ({value} bytes)"
