"""The provider's exec command: how this host runs a command on the remote machine, with piped stdio.

`exec_command` is an argv prefix: the remote argv is appended to it (`docker exec -i HOST` then runs it directly),
or, when an element contains `${COMMAND}`, the remote argv is shell-quoted into that element (for commands that
hand one string to a remote shell, like `ssh HOST ${COMMAND}`).

`ExecTransport.exec` makes it Driver-like for the one purpose of agent delivery (devsy/agent/delivery.py): raw
stdin/stdout/stderr and the exit status. The exec command decides the remote user; a request's user and workdir do
not apply, and environment variables are refused (they would have to travel on argv, where secrets do not go).
"""

from __future__ import annotations

import io
import shlex
import signal
import subprocess
import threading
from collections.abc import Sequence
from typing import BinaryIO

from devsy import process_tree
from devsy.driver.base import ExecRequest, ExecResult
from devsy.driver.remote.errors import RemoteUnreachable
from devsy.errors import DriverError
from devsy.stdin_pump import StdinPump

PLACEHOLDER = "${COMMAND}"
_CHUNK = 64 * 1024
_REAP_S = 10.0


class ExecTransport:
    def __init__(self, command: Sequence[str]) -> None:
        self.command = tuple(command)

    def argv(self, remote: Sequence[str]) -> list[str]:
        if any(PLACEHOLDER in part for part in self.command):
            quoted = shlex.join(remote)
            return [part.replace(PLACEHOLDER, quoted) for part in self.command]
        return [*self.command, *remote]

    def popen(self, remote: Sequence[str], stderr: int = subprocess.PIPE) -> subprocess.Popen:
        """Start `remote` there with piped stdin/stdout, in its own process group (so it can be killed whole)."""
        try:
            return subprocess.Popen(self.argv(remote), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                    start_new_session=True, bufsize=0)
        except OSError as exc:
            raise RemoteUnreachable(f"cannot run the provider's exec command {self.command[0]!r}: "
                                    f"{exc.strerror or exc}", hint="install it or fix exec.command") from exc

    def run(self, remote: Sequence[str], timeout: float = 60.0) -> tuple[int, bytes, bytes]:
        """Run a short command there; (exit code, stdout, stderr)."""
        proc = self.popen(remote)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_and_reap(proc)
            raise RemoteUnreachable(f"`{shlex.join(self.argv(remote))[:200]}` did not finish within {timeout:g}s",
                                    hint="check that the remote machine answers its exec command") from None
        return proc.returncode, out, err

    # -- Driver-like, for StreamDelivery ----------------------------------------------------------------------
    def exec(self, workspace_id: str, request: ExecRequest) -> ExecResult:
        if request.env:
            raise DriverError("the remote machine's exec command cannot carry environment variables safely",
                              hint="pass values on stdin instead")
        proc = self.popen(request.argv)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdin = proc.stdin

        def sink(data: bytes) -> None:
            view = memoryview(data)
            while view:
                view = view[stdin.write(view) or 0:]

        pump = StdinPump(request.stdin or io.BytesIO(b""), sink, stdin.close, owns_source=request.owns_stdin)
        readers = [threading.Thread(target=_copy, args=(proc.stdout, request.stdout), daemon=True),
                   threading.Thread(target=_copy, args=(proc.stderr, request.stderr), daemon=True)]
        unsubscribe = request.cancel.on_cancel(lambda: (pump.stop(), process_tree.signal_child(proc, signal.SIGKILL)))
        pump.start()
        for reader in readers:
            reader.start()
        try:
            for reader in readers:
                reader.join()
            code = proc.wait()
        finally:
            unsubscribe()
            pump.stop()
            pump.join(_REAP_S)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                stream.close()
        if pump.error is not None and not request.cancel.is_cancelled():
            raise DriverError(f"copying input to the remote machine failed: {pump.error}") from pump.error
        return ExecResult(exit_code=130 if request.cancel.is_cancelled() else code)


def _kill_and_reap(proc: subprocess.Popen) -> None:
    """KILL the command's group at once and reap it (bounded by process_tree's kill wait); release its pipes."""
    process_tree.stop_child(proc, grace=0)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _copy(source: BinaryIO, target: BinaryIO) -> None:
    for chunk in iter(lambda: source.read(_CHUNK), b""):
        target.write(chunk)
    target.flush()
