"""Host side of Exec: send the request's stdin as frames, copy output frames to its streams, check the protocol.

Every received frame is checked (1..32768 bytes, exactly one exit frame, nothing after it); a stream that ends
without an exit frame is a protocol error, never success. The request's CancelToken cancels the RPC.
"""

from __future__ import annotations

import io
import os
import select
import threading
from collections.abc import Iterator
from typing import BinaryIO

import grpc

from devsy.driver.base import ExecRequest, ExecResult
from devsy.exit_status import shell_status
from devsy.redaction import Redactor
from devsy.runtime.wire.constants import MAX_FRAME
from devsy.runtime.wire.deadline import CallDeadline
from devsy.runtime.wire.errors import RuntimeProtocolError
from devsy.runtime.host.rpc_errors import map_rpc_error
from devsy.runtime.v1 import runtime_pb2 as pb
from devsy.runtime.v1 import runtime_pb2_grpc

# How often a stdin read blocked on a caller-owned descriptor looks at the stop flag (data wakes select at once).
_STOP_POLL_S = 0.2
# Exit code reported for a command we cancelled ourselves (like the built-in Docker driver).
CANCELLED_EXIT = 130


def _fileno(stream: BinaryIO) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None


def client_frames(workspace_id: str, request: ExecRequest, stop: threading.Event) -> Iterator[pb.ExecClientMessage]:
    """start, stdin chunks (non-empty, at most MAX_FRAME), close_stdin; ends early once `stop` is set."""
    yield pb.ExecClientMessage(start=pb.ExecStart(workspace_id=workspace_id, argv=request.argv, user=request.user,
                                                  workdir=request.workdir, environment=request.env))
    source = request.stdin
    if source is not None:
        fd = _fileno(source)
        while not stop.is_set():
            if fd is not None:
                ready, _, _ = select.select([fd], [], [], _STOP_POLL_S)
                if not ready:
                    continue
                data = os.read(fd, MAX_FRAME)
            else:
                read1 = getattr(source, "read1", None)
                data = read1(MAX_FRAME) if read1 else source.read(MAX_FRAME)
            if not data:
                break
            yield pb.ExecClientMessage(stdin=data)
    if not stop.is_set():
        yield pb.ExecClientMessage(close_stdin=pb.CloseStdin())


def run_exec(stub: runtime_pb2_grpc.RuntimeDriverStub, provider: str, workspace_id: str, request: ExecRequest,
             redact: Redactor, timeout: float | None = None) -> ExecResult:
    redact.add([*request.env.values(), *request.argv[1:]])
    stop = threading.Event()
    deadline = CallDeadline(timeout)
    call = stub.Exec(client_frames(workspace_id, request, stop), timeout=deadline.timeout)
    unsubscribe = request.cancel.on_cancel(call.cancel)
    result: ExecResult | None = None
    try:
        for message in call:
            if result is not None:
                raise RuntimeProtocolError(f"provider {provider} sent a frame after the exit frame",
                                           hint="report this to the provider's authors")
            kind = message.WhichOneof("payload")
            if kind == "exit":
                # A signal with exit_code 0 beside it (a Go provider's {signal: TERM}) is a failure: 128+N, as a
                # shell says it, for every reader of the result (hooks, agent checks), not only `devsy exec`.
                reported = ExecResult(exit_code=message.exit.exit_code, signal=message.exit.signal)
                result = ExecResult(exit_code=shell_status(reported), signal=reported.signal)
                continue
            if kind not in ("stdout", "stderr"):
                raise RuntimeProtocolError(f"provider {provider} sent an Exec frame without payload",
                                           hint="report this to the provider's authors")
            data = getattr(message, kind).data
            if not 1 <= len(data) <= MAX_FRAME:
                raise RuntimeProtocolError(f"provider {provider} sent a {kind} frame of {len(data)} bytes (the "
                                           f"protocol allows 1..{MAX_FRAME})", hint="report this to the provider's "
                                                                                    "authors")
            target = request.stdout if kind == "stdout" else request.stderr
            try:
                target.write(data)
                target.flush()
            except BrokenPipeError:
                call.cancel()  # nobody reads our output any more: end the command instead of hanging it
                request.cancel.cancel()
    except grpc.RpcError as exc:
        if request.cancel.is_cancelled() and exc.code() is grpc.StatusCode.CANCELLED:  # type: ignore[attr-defined]
            return ExecResult(CANCELLED_EXIT)
        raise map_rpc_error(exc, provider, "Exec", redact, deadline) from None
    finally:
        stop.set()
        unsubscribe()
        if result is None:
            call.cancel()
    if result is None:
        raise RuntimeProtocolError(f"provider {provider} ended the Exec stream without an exit frame",
                                   hint="the command's outcome is unknown; report this to the provider's authors")
    return result
