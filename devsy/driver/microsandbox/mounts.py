"""Driver mounts as msb flags: host folders and files, named volumes, anonymous volumes, tmpfs.

msb parses `SOURCE:DEST:OPTIONS` by splitting on ':' and ',', and refuses a host path containing ',', ':' or ';'; it
then echoes that path in its error. So both are checked here, and errors name the mount by its target: a source (a
host path or volume name) may be a secret and never appears in a message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from devsy.driver.base import Mount, MountType
from devsy.driver.microsandbox.naming import VOLUME_NAME
from devsy.driver.reuse import PolicyItems
from devsy.errors import ConfigError

_BAD_IN_PATH = (",", ":", ";")


@dataclass(frozen=True)
class WorkspaceMountPolicy:
    """How msb presents the workspace folder: stat virtualization and host-permission mode (None = msb default)."""

    stat_virtualization: str | None = None
    host_permissions: str | None = None

    def items(self) -> PolicyItems:
        """msb's own option names and values: the workspace folder's mount options, and the extras of the
        recorded mount policy (so a later change of either option is caught by ReusePreflight)."""
        # msb 0.7 defaults are strict/private (seen in `msb inspect`); recorded explicitly so the policy label says
        # what the VM really got.
        return (("stat-virt", self.stat_virtualization or "strict"), ("host-perms", self.host_permissions or "private"))


@dataclass
class MountPlan:
    argv: list[str] = field(default_factory=list)
    named_volumes: list[str] = field(default_factory=list)  # to exist before the sandbox is created
    secrets: list[str] = field(default_factory=list)


def plan_mounts(workspace: Mount | None, others: list[Mount], policy: WorkspaceMountPolicy) -> MountPlan:
    """Validate every mount and turn it into msb flags (workspace mount first)."""
    plan = MountPlan()
    for index, mount in enumerate(([workspace] if workspace else []) + list(others)):
        where = "the workspace mount" if workspace is not None and index == 0 else f"the mount at {mount.target}"
        _check_target(mount.target, where)
        is_workspace = workspace is not None and index == 0
        if mount.type is MountType.BIND:
            plan.argv += _bind(mount, where, policy if is_workspace else None)
            plan.secrets.append(mount.source)
        elif mount.type is MountType.VOLUME and mount.source:
            if not VOLUME_NAME.fullmatch(mount.source):
                raise ConfigError(f"{where}: the volume name is not valid for MicroSandbox",
                                  hint="name volumes with letters, digits, '.', '_' and '-', starting with a letter "
                                  "or digit")
            if mount.source not in plan.named_volumes:
                plan.named_volumes.append(mount.source)
            plan.argv += ["--mount-named", f"{mount.source}:{mount.target}{_ro(mount, ':')}"]
            plan.secrets.append(mount.source)
        elif mount.type is MountType.VOLUME:
            # An anonymous volume: msb's "owned" volume is private to the sandbox and removed with it, as Docker's is.
            plan.argv += ["--mount-owned", f"{mount.target}{_ro(mount, ':')}"]
        else:
            plan.argv += ["--tmpfs", f"{mount.target}{_ro(mount, ':')}"]
    return plan


def _check_target(target: str, where: str) -> None:
    if not target.startswith("/") or any(ch in target for ch in _BAD_IN_PATH):
        raise ConfigError(f"{where}: the target {target!r} must be an absolute path without ',', ':' or ';'",
                          hint="change the mount's target in devsy/devcontainer.json")


def _bind(mount: Mount, where: str, policy: WorkspaceMountPolicy | None) -> list[str]:
    source = mount.source
    if not os.path.isabs(source) or any(ch in source for ch in _BAD_IN_PATH):
        raise ConfigError(f"{where}: MicroSandbox needs an absolute host path without ',', ':' or ';'",
                          hint="move or link the host folder to a path without those characters")
    if os.path.isdir(source):
        flag = "--mount-dir"
    elif os.path.isfile(source):
        flag = "--mount-file"
    else:
        raise ConfigError(f"{where}: the host path does not exist", hint="create it on the host first, then retry")
    options = ["ro" if mount.read_only else "rw"]
    if policy is not None and flag == "--mount-dir":
        options += [f"{key}={value}" for key, value in policy.items()]
    return [flag, f"{source}:{mount.target}:{','.join(options)}"]


def _ro(mount: Mount, sep: str) -> str:
    return f"{sep}ro" if mount.read_only else ""
