"""Seeing from the host that the agent an earlier `devsy up` set up is still in place: a reused `up` then makes no
round trip into the guest (a presence check and `agent setup` over exec cost ~0.3 s together).

The proof has two parts. The note (note.py) says which instance (its id and creation time) the agent was set up in
and how the files it runs from looked then (the agent file, the interpreter the launcher found: stamps.py). The
driver shows the instance's root filesystem on this host (ContainerDetails.host_root; the Docker engine's overlay
mount). The stamps are recorded only when the host's view gave the same ones as the guest's own at `agent setup`:
a mount over one of the files, which the guest sees and the host view does not, shows another file there and
leaves nothing recorded. A reused `up` skips the guest only when the instance is the same one and every file still
looks the same from the host. Anything else, or a driver without a host view, and `up` checks in the guest as
before. A mount made later inside the guest over those files is not seen here: `devsy ssh` then finds no agent
and delivers it (exit 199, ssh/tunnel.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from devsy.agent.guest.stamps import stamp
from devsy.driver.base import ContainerDetails


def instance_identity(details: ContainerDetails) -> str:
    """Which instance this is: a recreated one has another id, and an id is never given to two instances at once."""
    return f"{details.id}@{details.created_at}"


def host_stamps(details: ContainerDetails, guest: Mapping[str, str]) -> dict[str, str]:
    """The guest's stamps ({path: stamp}, from `agent setup`) if the host sees every one of those files the same
    way, else {} (nothing to prove with)."""
    if not guest or any(host_stamp(details, path) != value for path, value in guest.items()):
        return {}
    return dict(guest)


def still_in_place(details: ContainerDetails, recorded: Mapping[str, str]) -> bool:
    return bool(recorded) and all(host_stamp(details, path) == value for path, value in recorded.items())


def host_stamp(details: ContainerDetails, guest_path: str) -> str:
    """How the file at `guest_path` looks from the host ("" when the host cannot tell: no view, a stopped instance,
    a symbolic link on the way). The path is walked one name at a time from the root without following any link,
    so a link made in the guest is never resolved in the host's namespace."""
    if not details.host_root or not details.running or not guest_path.startswith("/"):
        return ""
    names = [name for name in guest_path.split("/") if name]
    if not names or any(name in (".", "..") for name in names):
        return ""
    fds: list[int] = []
    try:
        fds.append(os.open(details.host_root, os.O_PATH | os.O_DIRECTORY))
        for name in names[:-1]:
            fds.append(os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=fds[-1]))
            if not stat.S_ISDIR(os.fstat(fds[-1]).st_mode):  # a link (opened as itself) or a file: no walk on
                return ""
        return stamp(os.stat(names[-1], dir_fd=fds[-1], follow_symlinks=False))
    except (OSError, ValueError):  # ValueError: a NUL in a path the guest reported
        return ""
    finally:
        for fd in fds:
            os.close(fd)
