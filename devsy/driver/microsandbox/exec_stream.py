"""One command in a running sandbox through `msb exec --stream`: raw stdout/stderr, streamed stdin, cancellation.

`--stream` is msb's byte-faithful mode: stdout and stderr stay separate and arrive incrementally, and it needs a
piped (non-terminal) stdin, which devsy always gives it (closed at once for empty input). The guest's exit status is
msb's exit status. Every thread this starts is joined before `run_exec` returns.

msb's own failures exit 1 too, after an `error: ...` line on stderr, so a nonzero status alone cannot say who failed.
When the output looks like msb's failure (stderr ends with an `error:` line) or like a killed session (status above
128), the sandbox is inspected: gone or no longer running is msb's failure, raised as a typed error naming what
happened; a sandbox that still runs means the status is the guest command's (which may print `error: x` itself).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import threading
from typing import BinaryIO

from devsy import process_tree
from devsy.driver.base import ExecRequest, ExecResult
from devsy.driver.exec_guard import ExecGuard, host_group_plan
from devsy.driver.microsandbox.exec_outcome import check_exit
from devsy.driver.microsandbox.msb import MsbClient
from devsy.driver.microsandbox.process import Terminator, stop_group
from devsy.errors import DriverError
from devsy.stdin_pump import StdinPump, write_all

_CHUNK = 64 * 1024
_EXIT_AFTER_EOF_S = 30.0
_STDERR_TAIL = 4096  # bytes of stderr kept to recognise msb's closing `error:` line
CANCELLED_EXIT_CODE = 130


def exec_argv(name: str, request: ExecRequest) -> list[str]:
    """Arguments after `msb` (env values inside: show them only through redact_argv)."""
    args = ["exec", name]
    if request.user:
        args += ["--user", request.user]
    if request.workdir:
        args += ["--workdir", request.workdir]
    for key, value in request.env.items():
        args += ["--env", f"{key}={value}"]
    return [*args, "--stream", "--", *request.argv]


def run_exec(msb: MsbClient, name: str, request: ExecRequest) -> ExecResult:
    proc = msb.spawn(exec_argv(name, request), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, bufsize=0)
    # msb runs in a session of its own, so it would outlive a killed devsy: the guard then stops it, as cancel does.
    try:
        guard = ExecGuard.start(host_group_plan(proc.pid))
    except BaseException:
        stop_group(proc)
        raise
    try:
        result, stderr_tail = _run(proc, request)
    finally:
        if proc.returncode is not None:
            guard.release()  # reaped: msb, and with it the command, is gone
        guard.close()
    if result.exit_code != 0 and not request.cancel.is_cancelled():  # a cancelled session's status means nothing
        check_exit(msb, name, result.exit_code, stderr_tail, secrets=list(request.env.values()))
    return result


def _run(proc: subprocess.Popen, request: ExecRequest) -> tuple[ExecResult, bytes]:
    """The command's result and the last bytes of its stderr."""
    terminator = Terminator(proc)
    assert proc.stdin is not None
    sink = proc.stdin
    copier = StdinPump(request.stdin or io.BytesIO(b""), lambda data: write_all(sink.fileno(), data), sink.close,
                       owns_source=request.owns_stdin)
    pumps = [_Pump(proc.stdout, request.stdout, request), _Pump(proc.stderr, request.stderr, request, _STDERR_TAIL)]

    def on_cancel() -> None:  # may run in a signal handler: nothing here blocks
        copier.stop()
        terminator()

    unsubscribe = request.cancel.on_cancel(on_cancel)
    for thread in (copier, *pumps):
        thread.start()
    try:
        for pump in pumps:
            pump.join()  # output open = the command still runs; cancellation is what bounds this
        if process_tree.wait_child(proc, _EXIT_AFTER_EOF_S) is None:
            raise subprocess.TimeoutExpired(proc.args, _EXIT_AFTER_EOF_S)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        raise DriverError(f"`msb exec` closed its output but did not exit within {_EXIT_AFTER_EOF_S:.0f} s; it was "
                          "stopped", hint="retry; if it persists, check `msb doctor`") from None
    except BaseException:
        request.cancel.cancel()
        stop_group(proc)
        raise
    finally:
        unsubscribe()
        copier.stop()
        for thread in (copier, *pumps):
            thread.join()
        with contextlib.suppress(OSError):
            sink.close()  # a stopped pump leaves msb's stdin open; nothing writes to it any more
        terminator.disarm()
    return _result(proc, terminator, copier, pumps), pumps[1].tail


def _result(proc: subprocess.Popen, terminator: Terminator, copier: StdinPump, pumps: list[_Pump]) -> ExecResult:
    if terminator.fired:
        return ExecResult(exit_code=CANCELLED_EXIT_CODE)
    for failed in (copier.error, *(pump.error for pump in pumps)):
        if failed is not None:
            raise DriverError(f"copying the command's input or output failed: {failed}") from failed
    if proc.returncode < 0:
        raise DriverError(f"`msb exec` was ended by signal {-proc.returncode} before the command's exit status "
                          "arrived", hint="retry; check that nothing on the host kills msb processes")
    return ExecResult(exit_code=proc.returncode)


class _Pump(threading.Thread):
    """Copies one of msb's output pipes to the caller's stream as data arrives."""

    def __init__(self, source: BinaryIO | None, target: BinaryIO, request: ExecRequest, keep: int = 0) -> None:
        super().__init__(name="devsy-msb-exec-output", daemon=True)
        assert source is not None
        self._source, self._target, self._request, self._keep = source, target, request, keep
        self.error: BaseException | None = None
        self.tail = b""  # the last `keep` bytes copied

    def run(self) -> None:
        fd = self._source.fileno()
        writing = True
        try:
            while data := os.read(fd, _CHUNK):
                if self._keep:
                    self.tail = (self.tail + data)[-self._keep:]
                if writing:
                    writing = self._write(data)
        finally:
            self._source.close()

    def _write(self, data: bytes) -> bool:
        try:
            self._target.write(data)
            self._target.flush()
            return True
        except BrokenPipeError:
            pass  # nobody reads our output any more: end the command instead of hanging it
        except (OSError, ValueError) as exc:
            self.error = exc
        self._request.cancel.cancel()
        return False  # keep draining, so msb never blocks on a full pipe while it is being stopped
