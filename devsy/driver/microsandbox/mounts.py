"""Driver mounts as msb flags: host folders and files, named volumes, anonymous volumes, tmpfs.

msb parses `SOURCE:DEST:OPTIONS` by splitting on ':' and ',', and refuses a host path containing ',', ':' or ';'; it
then echoes that path in its error. So both are checked here, and errors name the mount by its target: a source (a
host path or volume name) may be a secret and never appears in a message.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import ClassVar

from devsy.driver.base import LABEL_MOUNT_POLICY, Mount, MountType
from devsy.driver.microsandbox.image_accounts import MountOwner
from devsy.driver.microsandbox.naming import VOLUME_NAME
from devsy.driver.reuse import MountPolicy, PolicyItems
from devsy.errors import ConfigError

_BAD_IN_PATH = (",", ":", ";")


@dataclass(frozen=True)
class WorkspaceMountPolicy:
    """How msb presents the workspace folder: stat virtualization, host-permission mode (None = msb default) and
    the numeric owner the guest sees (None = root:root, msb's default)."""

    stat_virtualization: str | None = None
    host_permissions: str | None = None
    owner: MountOwner | None = None

    # Every key items() can write, so a reader of the recorded policy can split off this part whatever it holds.
    KEYS: ClassVar[tuple[str, ...]] = ("stat-virt", "host-perms", "uid", "gid")

    @property
    def maps_owner(self) -> bool:
        """Whether msb can present an owner: `stat-virt=off` shows literal host metadata, and msb refuses an owner
        with it ("mount owner (uid/gid) cannot be combined with stat_virtualization=Off")."""
        return self.stat_virtualization != "off"

    def items(self) -> PolicyItems:
        """msb's own option names and values: the workspace folder's mount options, and the extras of the
        recorded mount policy (so a later change of any of them is caught by ReusePreflight)."""
        # msb 0.7 defaults are strict/private (seen in `msb inspect`); recorded explicitly so the policy label says
        # what the VM really got.
        items: PolicyItems = (("stat-virt", self.stat_virtualization or "strict"),
                              ("host-perms", self.host_permissions or "private"))
        # root:root is what msb shows without an owner: left out, so the argv and the label of a root workspace stay
        # what earlier devsy versions wrote (their sandboxes stay reusable).
        if self.owner is not None and not self.owner.is_root and self.maps_owner:
            items += (("uid", str(self.owner.uid)), ("gid", str(self.owner.gid)))
        return items

    def with_owner(self, owner: MountOwner | None) -> WorkspaceMountPolicy:
        return dataclasses.replace(self, owner=owner)


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


def recorded_owner(labels: dict[str, str]) -> MountOwner | None:
    """The workspace owner a sandbox's mount-policy label records (None: root:root, or no readable label).

    Reuse carries it forward: the image a sandbox boots stays the same for its whole life, so the owner of an
    unchanged identity cannot change; a changed identity is refused by the remote-user comparison, and a new image
    comes only with a new sandbox, whose owner is read from that image."""
    policy = MountPolicy.from_label(labels.get(LABEL_MOUNT_POLICY, ""))
    extras = dict(policy.extras) if policy is not None else {}
    uid, gid = extras.get("uid", ""), extras.get("gid", "")
    return MountOwner(int(uid), int(gid)) if uid.isdigit() and gid.isdigit() else None
