"""A guest command never outlives the process that runs it: a host-side guard kills its tree if that owner dies.

Engines keep an exec running after its attached client vanished (dockerd drains and discards the output, so the
guest never notices), and a SIGKILLed owner cannot clean up after itself. So the kill must come from something that
outlives the owner: at exec start the owner starts a guard (exec_guard_process), a separate interpreter in a session
of its own (a terminal hangup, Ctrl-C to the foreground group and the runtime supervisor's process-group teardown
do not reach it), and keeps the only write end of a pipe to the guard's stdin. The owner writes the kill plan, then
`done` once the command's end is known (it exited, or the owner killed its tree itself). End of file without `done`
means the owner is gone, however it went: the guard runs the plan, bounded, and exits.

The plan names the function to call ("module:function" and its keyword arguments), so any driver can use it. The
guard's stdout and stderr are /dev/null: holding the caller's pipes would make a caller that reads them to the end
wait for the guard.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from devsy import process_tree
from devsy.driver import exec_guard_process

# -I -S: no site, no user or environment paths: the guard starts in a fraction of a full interpreter's time.
_GUARD_ARGV = [sys.executable, "-I", "-S", str(Path(exec_guard_process.__file__))]
# Where the guard imports a plan's function from: ours, with devsy's own root first (an editable install finds it
# through an import hook that a -S interpreter lacks); no "" (our cwd is nothing the plan needs).
_DEVSY_ROOT = str(Path(exec_guard_process.__file__).resolve().parents[2])
# A released guard exits at once; past this we stop waiting for it (subprocess reaps it later).
_RELEASE_WAIT_S = 2.0


@dataclass(frozen=True)
class KillPlan:
    """What the guard calls when the owner dies: `action` is "module:function", called with `args` as keywords."""

    action: str
    args: dict[str, object] = field(default_factory=dict)


class ExecGuard:
    """The owner's side: `ExecGuard.start(plan)` before the command starts, `release()` once its end is known,
    `close()` always (closing without a release is what makes the guard kill)."""

    def __init__(self, proc: subprocess.Popen, write_fd: int) -> None:
        self._proc = proc
        self._fd = write_fd

    @classmethod
    def start(cls, plan: KillPlan) -> ExecGuard:
        read_fd, write_fd = os.pipe()  # both close-on-exec: no other child of ours inherits the write end
        try:
            # subprocess forks and execs at once: safe from a multi-threaded owner (the provider's gRPC server).
            proc = subprocess.Popen(_GUARD_ARGV, stdin=read_fd, stdout=subprocess.DEVNULL,  # noqa: S603
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        guard = cls(proc, write_fd)
        # One small write (well below the pipe's capacity): it never blocks, even before the guard runs.
        guard._write(json.dumps({"action": plan.action, "args": plan.args, "path": _import_path()}).encode() + b"\n")
        return guard

    def _write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # a guard that died early cannot be helped; the owner carries on
            os.write(self._fd, data)

    def add_args(self, **args: object) -> None:
        """Arguments for the plan known only after the start (a line of its own: one small, atomic pipe write)."""
        if self._fd >= 0:
            self._write(json.dumps({"args": args}).encode() + b"\n")

    def release(self) -> None:
        """The command's end is known: the guard exits without killing (reaped here, so no process of ours lingers;
        it is long up and blocked on its read by the time a command ends, so this wait costs next to nothing)."""
        if self._fd >= 0:
            self._write(exec_guard_process.DONE)
            self.close()
            process_tree.wait_child(self._proc, _RELEASE_WAIT_S)

    def close(self) -> None:
        """Without a release first, this is what makes the guard kill; it is not waited for (it must outlive us)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._proc.poll()


def _import_path() -> list[str]:
    return [_DEVSY_ROOT, *(entry for entry in sys.path if entry and entry != _DEVSY_ROOT)]


# -- a plan for commands that run as a host child in a session of their own (e.g. `msb exec`) ------------------------
_HOST_GROUP_STOP = "devsy.process_tree:stop_pid"
_TERM_GRACE_S = 5.0


def host_group_plan(pid: int) -> KillPlan:
    """Stop the process group that `pid` leads (a child started with start_new_session): TERM, then KILL. The
    recorded start time keeps the guard from signalling a later process that got the same pid."""
    return KillPlan(_HOST_GROUP_STOP, {"pid": pid, "start": process_tree.start_time(pid), "group": True,
                                       "grace": _TERM_GRACE_S})
