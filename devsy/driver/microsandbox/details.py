"""`msb inspect NAME --format json` as ContainerDetails. The inspect output holds env values: only the fields below
are ever read from it, and it is never logged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devsy.driver.base import ContainerDetails, InstanceMount, InstanceStatus

RUNNING = "Running"
_MOUNT_TYPES = {"Bind": "bind", "Named": "volume", "Owned": "volume", "Tmpfs": "tmpfs", "DiskImage": "disk"}


@dataclass(frozen=True)
class SandboxState:
    details: ContainerDetails
    msb_status: str  # Created, Starting, Running, Draining, Paused, Stopped or Crashed
    name: str  # the sandbox's msb name, which every msb command takes


def instance_id(name: str, created_at: str) -> str:
    """msb gives a sandbox a name but no id of its own, and devsy names a workspace's replacement as it named the old
    one; so an instance is its name plus its creation time: a replaced instance gets a new id (the Runtime Protocol
    requires that: devsy/runtime/conformance/cases_lifecycle.py), a stopped and started one keeps it."""
    return f"{name}@{created_at}" if created_at else name


def parse_inspect(data: dict[str, Any]) -> SandboxState:
    """Labels and mounts come from the running VM's config when there is one, else from the desired config."""
    config = data.get("active_config") or data.get("config") or {}
    runtime = config.get("runtime") or {}
    status = str(data.get("status", ""))
    name, created_at = str(data.get("name", "")), str(data.get("created_at", ""))
    details = ContainerDetails(
        id=instance_id(name, created_at),
        created_at=created_at,
        # Only a VM that runs is "running": Starting and Draining ones cannot take commands reliably yet/anymore.
        status=InstanceStatus.RUNNING if status == RUNNING else InstanceStatus.STOPPED,
        labels={str(k): str(v) for k, v in (config.get("labels") or {}).items()},
        mounts=[_mount(m) for m in config.get("mounts") or []],
        user=str(runtime.get("user") or ""),
        working_dir=str(runtime.get("workdir") or ""),
        started_at=str(data.get("updated_at", "")) if status == RUNNING else "",
    )
    return SandboxState(details=details, msb_status=status, name=name)


def _mount(mount: dict[str, Any]) -> InstanceMount:
    kind = str(mount.get("type", ""))
    return InstanceMount(type=_MOUNT_TYPES.get(kind, kind.lower()),
                         source=str(mount.get("host") or mount.get("name") or ""),
                         destination=str(mount.get("guest", "")))
