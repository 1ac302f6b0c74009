"""Seeing from the host that the agent an earlier `devsy up` set up is still in place: a reused `up` then makes no
round trip into the guest (a presence check and `agent setup` over exec cost ~0.3 s together).

The proof has two parts. The note (note.py) says which instance (its id and creation time) the agent was set up in
and what the agent file looked like afterwards (size, modification time, inode). The driver shows the instance's
root filesystem on this host (ContainerDetails.host_root; the Docker engine's overlay mount). When the instance is
the same one, no mount of it covers the agent's folder (the guest would see the mount, the host view would not),
and the file there still looks the same, the agent is the one that was checked and set up. Anything else, or a
driver without a host view, and `up` checks in the guest as before.
"""

from __future__ import annotations

import os
import stat

from devsy.driver.base import ContainerDetails


def instance_identity(details: ContainerDetails) -> str:
    """Which instance this is: a recreated one has another id, and an id is never given to two instances at once."""
    return f"{details.id}@{details.created_at}"


def agent_stamp(details: ContainerDetails, guest_path: str) -> str:
    """What the file at `guest_path` looks like from the host ("" when the host cannot see it as the guest does)."""
    root = details.host_root
    if not root or not details.running or _covered_by_mount(details, guest_path):
        return ""
    real_root = os.path.realpath(root)
    # A symbolic link on the way would be resolved in the host's namespace, not the guest's: no answer then.
    real = os.path.realpath(os.path.join(root, guest_path.lstrip("/")))
    if os.path.commonpath([real, real_root]) != real_root or real != os.path.join(real_root, guest_path.lstrip("/")):
        return ""
    try:
        info = os.lstat(real)
    except OSError:
        return ""
    if not stat.S_ISREG(info.st_mode) or not info.st_mode & 0o111:
        return ""
    return f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}"


def _covered_by_mount(details: ContainerDetails, guest_path: str) -> bool:
    for mount in details.mounts:
        target = mount.destination.rstrip("/")
        if not target or guest_path == target or guest_path.startswith(target + "/"):
            return True
    return False
