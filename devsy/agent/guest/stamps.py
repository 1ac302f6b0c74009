"""How a file looks (type and mode, size, modification and change times, inode), in one format for the guest and the
host: `agent setup` reports the stamps of the files it runs from as the guest sees them, and the host records them
only where its own view of the instance's root gives the same ones (devsy/agent/host_view.py)."""

from __future__ import annotations

import os


def stamp(info: os.stat_result) -> str:
    return "%o:%d:%d:%d:%d" % (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def guest_stamps(paths: list) -> dict:
    """{path: stamp} of each file (not following a final symbolic link), its folder's links resolved so that the
    host can walk the path without following any; a file that cannot be seen is left out."""
    stamps = {}
    for path in paths:
        folder, name = os.path.split(os.path.abspath(path))
        resolved = os.path.join(os.path.realpath(folder), name)
        try:
            stamps[resolved] = stamp(os.lstat(resolved))
        except OSError:
            continue
    return stamps
