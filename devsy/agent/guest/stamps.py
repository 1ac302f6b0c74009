"""How a file looks (type and mode, size, modification and change times, inode), in one format for the guest and the
host: `agent setup` reports the stamps of the files it runs from as the guest sees them, and the host records them
only where its own view of the instance's root gives the same ones (devsy/agent/host_view.py)."""

from __future__ import annotations

import os

_MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup


def stamp(info: os.stat_result) -> str:
    return "%o:%d:%d:%d:%d" % (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def guest_stamps(paths: list) -> dict:
    """{path: stamp} of each path and of every symbolic link on the way from it to the file it leads to (a link
    retargeted later, as `alternatives` does, changes a stamp). Each key has its folder's links resolved, so that the
    host can walk it without following any. What cannot be seen is left out."""
    stamps = {}
    for path in paths:
        current = os.path.abspath(path)
        for _ in range(_MAX_LINKS):
            folder, name = os.path.split(current)
            current = os.path.join(os.path.realpath(folder), name)
            try:
                info = os.lstat(current)
            except OSError:
                break
            stamps[current] = stamp(info)
            if not os.path.islink(current):
                break
            current = os.path.join(os.path.dirname(current), os.readlink(current))
    return stamps


def search_path_dirs(program: str) -> list:
    """The folders of PATH that a lookup of `program` reads, up to the one holding it: an entry added to one of them
    later (a `program` found first) changes that folder's stamp."""
    dirs = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        dirs.append(entry)
        candidate = os.path.join(entry, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            break
    return dirs
