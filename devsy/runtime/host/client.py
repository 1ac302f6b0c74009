"""Host side: the RuntimeDriver RPCs as typed calls (dataclasses in, dataclasses out, typed errors)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, BinaryIO

import grpc

from devsy.arch import SUPPORTED
from devsy.driver.base import ContainerDetails, ExecRequest, ExecResult, RunOptions
from devsy.redaction import Redactor
from devsy.runtime.wire.constants import MAX_FRAME
from devsy.runtime.wire.convert import details_from_pb, run_request
from devsy.runtime.wire.deadline import CallDeadline
from devsy.runtime.wire.errors import RuntimeProtocolError
from devsy.runtime.host.exec_client import run_exec
from devsy.runtime.host.rpc_errors import map_rpc_error
from devsy.runtime.host.info_check import ProviderDescription, validate_info
from devsy.runtime.v1 import runtime_pb2 as pb
from devsy.runtime.v1 import runtime_pb2_grpc

# Unary RPCs are bounded; RunImage may pull an image, so it gets longer.
DEFAULT_TIMEOUT_S = 120.0
RUN_TIMEOUT_S = 900.0
ARCHITECTURES = SUPPORTED  # the protocol allows devsy's architectures (devsy.arch)


class RuntimeClient:
    def __init__(self, stub: runtime_pb2_grpc.RuntimeDriverStub, provider: str, redact: Redactor | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.stub = stub
        self.provider = provider
        self.redact = redact or Redactor()
        self.timeout = timeout

    def _call(self, action: str, method: Callable[..., Any], request: Any, timeout: float | None = None,
              redact: Redactor | None = None) -> Any:
        deadline = CallDeadline(timeout or self.timeout)
        try:
            return method(request, timeout=deadline.timeout)
        except grpc.RpcError as exc:
            raise map_rpc_error(exc, self.provider, action, redact or self.redact, deadline) from None

    def info(self, *, opt_in_on_run: bool = True) -> ProviderDescription:
        reply = self._call("Info", self.stub.Info, pb.InfoRequest(supports_recreate_on_run=opt_in_on_run))
        return validate_info(reply, self.provider, opted_in_on_run=opt_in_on_run)

    def preflight(self, disable_auto_start: bool = False) -> None:
        self._call("Preflight", self.stub.Preflight, pb.PreflightRequest(disable_auto_start=disable_auto_start))

    def reuse_preflight(self, workspace_id: str, remote_user: str) -> None:
        self._call("ReusePreflight", self.stub.ReusePreflight,
                   pb.ReusePreflightRequest(workspace_id=workspace_id, remote_user=remote_user))

    def find(self, workspace_id: str) -> ContainerDetails | None:
        reply = self._call("Find", self.stub.Find, pb.FindRequest(workspace_id=workspace_id))
        return details_from_pb(reply.container, self.provider) if reply.found else None

    def target_architecture(self, workspace_id: str) -> str:
        reply = self._call("TargetArchitecture", self.stub.TargetArchitecture,
                           pb.TargetArchitectureRequest(workspace_id=workspace_id))
        if reply.architecture not in ARCHITECTURES:
            raise RuntimeProtocolError(f"provider {self.provider} reported architecture {reply.architecture!r}",
                                       hint="the protocol allows amd64 or arm64; report this to its authors")
        return reply.architecture

    def run_image(self, workspace_id: str, options: RunOptions) -> None:
        redact = Redactor()
        redact.add([*options.env.values(), *(m.source for m in options.mounts)])
        if options.workspace_mount is not None:
            redact.add([options.workspace_mount.source])
        self._call("RunImage", self.stub.RunImage, run_request(workspace_id, options), RUN_TIMEOUT_S, redact)

    def start(self, workspace_id: str) -> None:
        self._call("Start", self.stub.Start, pb.StartRequest(workspace_id=workspace_id))

    def stop(self, workspace_id: str) -> None:
        self._call("Stop", self.stub.Stop, pb.StopRequest(workspace_id=workspace_id))

    def delete(self, workspace_id: str) -> None:
        self._call("Delete", self.stub.Delete, pb.DeleteRequest(workspace_id=workspace_id))

    def exec(self, workspace_id: str, request: ExecRequest, timeout: float | None = None) -> ExecResult:
        return run_exec(self.stub, self.provider, workspace_id, request, Redactor(), timeout)

    def logs(self, workspace_id: str, out: BinaryIO, timeout: float | None = None) -> None:
        deadline = CallDeadline(timeout or self.timeout)
        try:
            for chunk in self.stub.Logs(pb.LogsRequest(workspace_id=workspace_id), timeout=deadline.timeout):
                if not 1 <= len(chunk.data) <= MAX_FRAME:
                    raise RuntimeProtocolError(f"provider {self.provider} sent a logs frame of {len(chunk.data)} "
                                               "bytes", hint=f"the protocol allows 1..{MAX_FRAME}; report this")
                out.write(chunk.data)
        except grpc.RpcError as exc:
            raise map_rpc_error(exc, self.provider, "Logs", self.redact, deadline) from None
        out.flush()
