"""A session the SSH master runs with the workspace's driver instead of through the agent: an argv session (`devsy
exec`) where the agent cannot run it (below), and, where the guest has no agent, any session without a terminal (its
argv and environment made as the host-side exec-session server makes them: ssh/exec_commands.py session_exec).

That is the engine's exec, which the agent cannot stand in for: where the guest cannot run the agent (no python3:
its `devsy ssh` sessions are exec sessions too), where the record's remoteUser is a form only the engine reads (a
bare uid), and where the agent in the guest predates argv sessions. The client could run the same exec itself
(cli/commands.py exec_with_driver), but it would first pay for a driver of its own: the engine client's import, or
an external provider's launch and handshake. The master's driver is already open.

An argv session's request is the one `devsy exec`'s driver path makes (workspace/operations.py exec_command): the record's user
and folder unless given, remoteEnv under --env. The command reads the client's stdin and writes to its stdout and
stderr directly (the descriptors it handed over); the reply gives the status the driver path would exit with.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import BinaryIO, NamedTuple, cast

from devsy.devcontainer.session_env import SessionEnv, apply_to_exec
from devsy.driver.base import CancelToken, ExecRequest
from devsy.exit_status import shell_status
from devsy.reader_gone import WatchedOutput
from devsy.stdin_pump import write_all
from devsy.ssh.client import SessionRequest
from devsy.ssh.exec_commands import session_environment, session_exec
from devsy.ssh.tunnel import GatedInput
from devsy.workspace.operations import OpenWorkspace


class DriverCommand(NamedTuple):
    """A session's command as the master's driver runs it (run_with_driver)."""

    argv: list[str]
    user: str
    workdir: str
    env: dict[str, str]
    remote: SessionEnv  # the session env applied on top of `env` (empty when `env` already holds it)


def driver_command(ws: OpenWorkspace, request: SessionRequest, user: str, explicit_env: dict[str, str],
                   remote: SessionEnv) -> DriverCommand:
    """What the driver runs for a session the master chose to run so (mux/master.py _by_driver). An argv session:
    `devsy exec`'s request, with the client's --env (`explicit_env`) over `remote`. A session without a terminal:
    as the host-side exec-session server would run it (ssh/exec_commands.py session_exec), as the SSH user a
    connection would log in as, with the env its SSH env requests carry (the remoteEnv is already in them)."""
    if request.argv is not None:
        return DriverCommand(request.argv, user, request.workdir, explicit_env, remote)
    user = user or "root"
    argv, env = session_exec(user, ws.record.workspace_folder, request.command,
                             session_environment(SessionEnv({}), request.env))
    return DriverCommand(argv, user, "", env, SessionEnv({}))


class _FdOutput(io.RawIOBase):
    """A client's output descriptor as the driver's stream: every byte written (a short write is continued), as the
    agent path writes it (ssh/client.py)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        write_all(self._fd, data)
        return len(data)


def run_with_driver(ws: OpenWorkspace, command: DriverCommand, stdin_fd: int | None, stdout_fd: int, stderr_fd: int,
                    cancel: CancelToken, started: Callable[[], None]) -> dict:
    """Run `command` (its argv as its user in its workdir, its env over the session's remote env) with the
    workspace's driver and return the master's reply. `started` is called just before the command goes to the
    driver. The descriptors are this function's, closed whatever happens: by the time it returns or raises (a
    DevsyError from the driver, say), nothing writes the output ones, and the input one is closed once no read of it
    is under way."""
    gated: GatedInput | None = None
    try:
        # No fileno: the driver reads through read1, whose blocked read dispose() wakes; so the end of this
        # function, not a copier the driver may leave behind, decides when the client's stdin is closed.
        if stdin_fd is not None:
            gated = GatedInput(stdin_fd, owns_fd=True)
            stdin_fd = None
            gated.open_gate()
        stdout, stderr = WatchedOutput(_FdOutput(stdout_fd)), WatchedOutput(_FdOutput(stderr_fd))  # type: ignore
        request = ExecRequest(argv=list(command.argv), stdin=cast(BinaryIO, gated), owns_stdin=True,
                              stdout=cast(BinaryIO, stdout), stderr=cast(BinaryIO, stderr), user=command.user,
                              workdir=command.workdir, env=dict(command.env), cancel=cancel)
        apply_to_exec(request, command.remote)
        if cancel.is_cancelled():
            return {"op": "end", "cancelled": True}
        started()
        result = ws.driver.exec(ws.record.id, request)
    finally:
        if gated is not None:
            gated.dispose()
        for fd in (stdin_fd, stdout_fd, stderr_fd):
            if fd is not None:
                os.close(fd)
    # Read before the cancellation: a driver ends a command whose reader went away as cancelled.
    if stdout.reader_gone or stderr.reader_gone:
        return {"op": "end", "exit_code": None, "signal": "PIPE", "broken_pipe": True}
    if cancel.is_cancelled():
        return {"op": "end", "cancelled": True}
    # The status as a shell gives it (what `devsy exec`'s driver path exits with), whatever the signal's name.
    return {"op": "end", "exit_code": shell_status(result), "signal": ""}
