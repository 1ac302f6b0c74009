"""Commands in a container that has no /bin/sh: the argv runs as given, and its tree is killed from the host.

Every other exec runs under the shell wrapper of exec_tree.py, which a shell-less image cannot run (the engine fails
it with exit 126 before the command starts). Such a command is started as is; to cancel it, the engine's `Pid` of
the exec (a pid in the engine's pid namespace) is pinned on this host and the tree under it is killed through
/proc, which works when the engine runs on this host and devsy may signal the container's processes. Otherwise the
cancel is a clear error, never a command left running unnoticed. Without the wrapper, a command killed by a signal
reports the engine's 128+N exit code alone (no signal name).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from devsy import process_tree
from devsy.bounded_wait import WaitTimeout, poll_until
from devsy.driver.docker.engine import engine_errors
from devsy.errors import DriverError

if TYPE_CHECKING:  # the SDK, imported by whoever made the client (engine.py)
    import docker

# How long an exec the engine was told to start may take to report its process (it runs at once in practice).
_START_WAIT_S = 10.0

_NO_HOST_VIEW_HINT = ("run devsy on the Docker engine's own host, as a user that may signal the container's "
                      "processes, or use an image with /bin/sh")


class ExecNeverStarted(DriverError):
    """The engine never ran an exec it was asked to start."""

    kind = "exec-never-started"


def has_shell(host_root: str) -> bool:
    """Whether the running container has /bin/sh, looked up in its root filesystem as mounted on this host
    (container_spec.host_root; free, where asking the engine, an archive request or an exec, costs ~40 ms per
    command). Where the host cannot see it ("") the answer is yes: the wrapper is used, and a shell-less image fails
    with the engine's exit 126, as the kill needs that view too."""
    # /bin may be a symlink (usr-merged images: a relative one, resolved inside the root as wanted).
    return not host_root or os.path.lexists(os.path.join(host_root, "bin", "sh"))


def kill_exec_tree(api: docker.APIClient, container_id: str, exec_id: str) -> int:
    """Kill the process tree of the running exec `exec_id` from the host; how many processes were killed (0 when the
    exec had already ended). Raises DriverError when its process cannot be seen or signalled from here."""
    pid = _exec_pid(api, exec_id)
    if pid is None:
        return 0

    def still_the_exec() -> bool:
        # Asked once the pidfd is open: the engine still runs the exec as `pid` (so the pidfd names it, not a later
        # process with the same number), and the process on this host is in the container's cgroup (so the engine's
        # pid namespace is ours, not a remote engine's number that names a stranger here).
        return _exec_pid(api, exec_id) == pid and _in_container(pid, container_id)

    try:
        root = process_tree.pin(pid, still_the_exec)
    except PermissionError as exc:
        raise DriverError(f"cannot stop the command (pid {pid}): {exc.strerror}", hint=_NO_HOST_VIEW_HINT) from exc
    if root is None:
        if _exec_pid(api, exec_id) is None:
            return 0  # it ended by itself meanwhile
        raise DriverError("cannot stop the command: the engine's process for it is not visible on this host",
                          hint=_NO_HOST_VIEW_HINT)
    with root:
        try:
            stopped = process_tree.kill_tree(root)
        except PermissionError as exc:
            raise DriverError(f"cannot stop the command (pid {pid}): {exc.strerror}", hint=_NO_HOST_VIEW_HINT) from exc
    if not all(one.ended for one in stopped):
        raise DriverError("a cancelled command's processes survived SIGKILL (stuck in the kernel)",
                          hint="look for processes in state D in the container")
    return sum(one.outcome is process_tree.Outcome.KILLED for one in stopped)


def _exec_pid(api: docker.APIClient, exec_id: str) -> int | None:
    """The host pid of the running exec; None once it has ended. Waits (bounded) for a just-started exec's pid."""

    def inspect() -> dict:
        with engine_errors("reading a command's state"):
            return api.exec_inspect(exec_id)

    try:
        info = poll_until(inspect, lambda i: not i.get("Running") and i.get("ExitCode") is not None
                          or bool(i.get("Running") and i.get("Pid")),
                          timeout=_START_WAIT_S, interval=0.02, what="the engine to start the command")
    except WaitTimeout as timeout:
        raise ExecNeverStarted("the engine never started the command",
                               hint="check the Docker daemon's log") from timeout
    return int(info["Pid"]) if info.get("Running") else None


def _in_container(pid: int, container_id: str) -> bool:
    """Whether the process's cgroup is the container's: a path component named by its full id (cgroupfs driver:
    `/docker/<id>`, systemd: `/system.slice/docker-<id>.scope`), never a part of a name."""
    if not re.fullmatch(r"[0-9a-f]{64}", container_id):
        return False
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return False
    names = {container_id, f"docker-{container_id}.scope"}
    return any(names & set(line.split(":", 2)[-1].split("/")) for line in lines)
