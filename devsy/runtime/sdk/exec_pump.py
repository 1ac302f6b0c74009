"""The provider side of Exec: validate the client's frames, feed stdin, stream output, end with one exit frame.

Three threads per stream: the gRPC worker (sends frames), an input thread (reads client frames into a pipe that is
the command's stdin) and a driver thread (runs `driver.exec`). Cancellation, a deadline or a malformed frame cancel
the driver's CancelToken, which kills the command's process tree; the workspace keeps running.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator

import grpc

from devsy.driver.base import CancelToken, Driver, ExecRequest, ExecResult
from devsy.redaction import Redactor
from devsy.runtime.wire.errors import InvalidArgument
from devsy.runtime.sdk import validate
from devsy.runtime.sdk.channel import BoundedChannel, FrameWriter, Outcome
from devsy.runtime.v1 import runtime_pb2 as pb

# Frames buffered between the driver and gRPC per stream (at most 512 KiB): enough to keep the pipe full.
_QUEUE_FRAMES = 16
# After the RPC has ended, how long we still wait for a driver to honour cancellation before letting go of it.
_DRIVER_GRACE_S = 30.0
_POLL_S = 1.0
_STDIN_PIPE_BYTES = 1024 * 1024

_HINT = "send exactly one start frame, then non-empty stdin frames, then one close_stdin, then half-close"


def _frame(field: str):
    return lambda data: pb.ExecServerMessage(**{field: pb.OutputChunk(data=data)})


class ExecSession:
    def __init__(self, driver: Driver, requests: Iterator[pb.ExecClientMessage], context: grpc.ServicerContext,
                 redact: Redactor) -> None:
        self._driver = driver
        self._requests = requests
        self._context = context
        self.redact = redact
        self._token = CancelToken()
        self._output = BoundedChannel(_QUEUE_FRAMES)
        self._violation = ""
        self._lock = threading.Lock()
        self._rpc_done = False

    def run(self) -> Iterator[pb.ExecServerMessage]:
        start = self._start_frame()
        validate.exec_start(start)
        self.redact.add([*start.environment.values(), *start.argv[1:]])
        read_fd, write_fd = os.pipe()
        with contextlib.suppress(OSError, AttributeError):  # fewer wake-ups per MiB; the default 64 KiB also works
            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, _STDIN_PIPE_BYTES)
        stdin = os.fdopen(read_fd, "rb", buffering=0)
        request = ExecRequest(argv=list(start.argv), stdout=FrameWriter(self._output, _frame("stdout")),
                              stderr=FrameWriter(self._output, _frame("stderr")), stdin=stdin,
                              user=start.user, workdir=start.workdir, env=dict(start.environment),
                              cancel=self._token, owns_stdin=True)
        if not self._context.add_callback(self._on_rpc_done):
            self._on_rpc_done()  # the RPC already ended (cancelled before we got here)
        threading.Thread(target=self._pump_input, args=(write_fd,), name="exec-input", daemon=True).start()
        threading.Thread(target=self._run_driver, args=(start.workspace_id, request), name="exec-driver",
                         daemon=True).start()
        try:
            outcome = yield from self._forward_output()
        finally:
            stdin.close()  # the command is done: a still-writing input thread gets EPIPE and just validates
        if outcome is None or not self._context.is_active():
            return  # cancelled or past the deadline: gRPC has already ended the RPC with that status
        with self._lock:
            violation = self._violation
        if violation:
            raise InvalidArgument(f"malformed Exec stream: {violation}", hint=_HINT)
        if outcome.error is not None:
            raise outcome.error
        result: ExecResult = outcome.result
        yield pb.ExecServerMessage(exit=pb.ExecExit(exit_code=result.exit_code, signal=result.signal))

    def _start_frame(self) -> pb.ExecStart:
        try:
            first = next(self._requests)
        except StopIteration:
            raise InvalidArgument("malformed Exec stream: it ended before the start frame", hint=_HINT) from None
        if first.WhichOneof("payload") != "start":
            raise InvalidArgument("malformed Exec stream: the first frame is not a start frame", hint=_HINT)
        return first.start

    def _forward_output(self):
        waited_after_end = 0.0
        while True:
            item = self._output.get(timeout=_POLL_S)
            if item is None:
                if not self._context.is_active():
                    waited_after_end += _POLL_S
                    if waited_after_end >= _DRIVER_GRACE_S:
                        return None  # a driver that ignores cancellation: do not pin this worker forever
                continue
            if isinstance(item, Outcome):
                return item
            yield item

    def _run_driver(self, workspace_id: str, request: ExecRequest) -> None:
        try:
            outcome = Outcome(result=self._driver.exec(workspace_id, request))
        except BaseException as exc:  # noqa: BLE001 - handed to the gRPC thread, which maps it
            outcome = Outcome(error=exc)
        self._output.finish(outcome)

    def _on_rpc_done(self) -> None:
        with self._lock:
            self._rpc_done = True
        self._token.cancel()  # no-op when the command already finished
        self._output.close()

    def _violate(self, what: str) -> None:
        with self._lock:
            if self._rpc_done or self._violation:
                return
            self._violation = what
        self._token.cancel()

    def _pump_input(self, write_fd: int) -> None:
        writable, closed = True, False
        try:
            for message in self._requests:
                kind = message.WhichOneof("payload")
                if closed:
                    return self._violate("a frame arrived after close_stdin")
                if kind == "stdin":
                    if not message.stdin:
                        return self._violate("an empty stdin frame (send close_stdin to end input)")
                    if writable:
                        writable = self._write(write_fd, message.stdin)
                elif kind == "close_stdin":
                    closed = True
                    os.close(write_fd)
                    write_fd = -1
                elif kind == "start":
                    return self._violate("a second start frame")
                else:
                    return self._violate("a frame without payload")
            if not closed:
                self._violate("the client ended its stream before close_stdin")
        except grpc.RpcError:
            self._token.cancel()  # the client went away
        except ValueError:
            pass  # the RPC is over and gRPC closed the request iterator under us
        finally:
            if write_fd >= 0:
                os.close(write_fd)

    @staticmethod
    def _write(fd: int, data: bytes) -> bool:
        """Write all of `data` into the command's stdin; False once the command no longer reads it."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except (BrokenPipeError, OSError):
            return False
        return True
