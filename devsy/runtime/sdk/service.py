"""The RuntimeDriver gRPC service over any Driver: validation, translation and error mapping per RPC."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from devsy.driver.base import LABEL_MOUNT_POLICY, LABEL_REMOTE_USER, Driver
from devsy.errors import NotFound
from devsy.redaction import Redactor
from devsy.runtime.wire.convert import details_to_pb
from devsy.runtime.wire.errors import Unsupported
from devsy.runtime.sdk import validate
from devsy.runtime.sdk.channel import BoundedChannel, FrameWriter, Outcome
from devsy.runtime.sdk.errors import abort
from devsy.runtime.sdk.exec_pump import ExecSession
from devsy.runtime.sdk.info import ProviderInfo, info_response
from devsy.runtime.sdk.reuse import expected_policy
from devsy.runtime.v1 import runtime_pb2 as pb
from devsy.runtime.v1 import runtime_pb2_grpc

_LOG_QUEUE_FRAMES = 16


def _unary(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a unary handler with a per-request redactor; any exception becomes the protocol's error status."""

    @functools.wraps(method)
    def handler(self: RuntimeService, request: Any, context: grpc.ServicerContext) -> Any:
        redact = Redactor()
        try:
            return method(self, request, context, redact)
        except Exception as exc:  # noqa: BLE001 - every failure is mapped; abort() raises
            abort(context, method.__name__, exc, redact)

    return handler


class RuntimeService(runtime_pb2_grpc.RuntimeDriverServicer):
    def __init__(self, driver: Driver, info: ProviderInfo) -> None:
        self.driver = driver
        self.info = info

    @_unary
    def Info(self, request: pb.InfoRequest, context, redact):  # noqa: N802 - gRPC method names
        return info_response(self.info, self.driver.capabilities(), request)

    @_unary
    def Preflight(self, request: pb.PreflightRequest, context, redact):  # noqa: N802
        check = getattr(self.driver, "preflight", None)
        if check is not None:
            check(disable_auto_start=request.disable_auto_start)
        return pb.PreflightResponse()

    @_unary
    def ProvisioningPreflight(self, request, context, redact):  # noqa: N802
        if not self.info.provisioning_preflight:
            raise Unsupported("this runtime has no provisioning preflight", hint="do not call it unless advertised")
        check = getattr(self.driver, "provisioning_preflight", None)
        if check is not None:
            check()
        return pb.ProvisioningPreflightResponse()

    @_unary
    def ReusePreflight(self, request: pb.ReusePreflightRequest, context, redact):  # noqa: N802
        if not (self.driver.capabilities().reuse_preflight and self.info.api_minor >= 2):
            raise Unsupported("this runtime has no reuse preflight", hint="do not call it unless advertised")
        workspace_id = validate.workspace_id(request.workspace_id)
        found = self.driver.find(workspace_id)
        if found is None:
            raise NotFound(f"workspace {workspace_id} does not exist", hint="create it instead of reusing it")
        policy = expected_policy(found.labels.get(LABEL_MOUNT_POLICY, ""), request.remote_user)
        self.driver.reuse_preflight(workspace_id, request.remote_user, policy)
        return pb.ReusePreflightResponse()

    @_unary
    def Find(self, request: pb.FindRequest, context, redact):  # noqa: N802
        found = self.driver.find(validate.workspace_id(request.workspace_id))
        if found is None:
            return pb.FindResponse(found=False)
        redact.add(m.source for m in found.mounts)  # the response carries them; an error message must not
        return pb.FindResponse(found=True, container=details_to_pb(found))

    @_unary
    def TargetArchitecture(self, request: pb.TargetArchitectureRequest, context, redact):  # noqa: N802
        return pb.TargetArchitectureResponse(architecture=self.driver.target_architecture(request.workspace_id))

    @_unary
    def RunImage(self, request: pb.RunImageRequest, context, redact):  # noqa: N802
        redact.add([*request.environment.values(), *(m.source for m in request.mounts),
                    request.workspace_mount.source])
        options = validate.run_request(request, self.driver.capabilities(),
                                       lambda: self.driver.target_architecture(request.workspace_id))
        # Permission is per request and needs ON_RUN support; discovery (Info) never grants it.
        options.allow_recreate = request.allow_recreate and self.info.recreate_on_run
        options.labels.setdefault(LABEL_REMOTE_USER, options.remote_user)
        self.driver.run(request.workspace_id, options)
        return pb.RunImageResponse()

    @_unary
    def Start(self, request: pb.StartRequest, context, redact):  # noqa: N802
        self.driver.start(validate.workspace_id(request.workspace_id))
        return pb.StartResponse()

    @_unary
    def Stop(self, request: pb.StopRequest, context, redact):  # noqa: N802
        self.driver.stop(validate.workspace_id(request.workspace_id))
        return pb.StopResponse()

    @_unary
    def Delete(self, request: pb.DeleteRequest, context, redact):  # noqa: N802
        self.driver.delete(validate.workspace_id(request.workspace_id))
        return pb.DeleteResponse()

    def Exec(self, request_iterator, context):  # noqa: N802
        session = ExecSession(self.driver, request_iterator, context, Redactor())
        try:
            yield from session.run()
        except Exception as exc:  # noqa: BLE001 - mapped to the protocol's error; abort() raises
            abort(context, "Exec", exc, session.redact)

    def Logs(self, request: pb.LogsRequest, context) -> Iterator[pb.OutputChunk]:  # noqa: N802
        redact = Redactor()
        try:
            yield from self._logs(request, context)
        except Exception as exc:  # noqa: BLE001
            abort(context, "Logs", exc, redact)

    def _logs(self, request: pb.LogsRequest, context) -> Iterator[pb.OutputChunk]:
        if not self.driver.capabilities().logs:
            raise Unsupported("this runtime does not offer workspace logs", hint="do not call Logs unless advertised")
        workspace_id = validate.workspace_id(request.workspace_id)
        channel = BoundedChannel(_LOG_QUEUE_FRAMES)
        if not context.add_callback(channel.close):
            return  # the RPC already ended

        def run() -> None:
            try:
                self.driver.logs(workspace_id, FrameWriter(channel, lambda data: pb.OutputChunk(data=data)))
                channel.finish(Outcome())
            except BaseException as exc:  # noqa: BLE001 - handed to the gRPC thread
                channel.finish(Outcome(error=exc))

        threading.Thread(target=run, name="logs", daemon=True).start()
        while True:
            item = channel.get(timeout=1.0)
            if item is None:
                if not context.is_active():
                    return
                continue
            if isinstance(item, Outcome):
                if item.error is not None and context.is_active():
                    raise item.error
                return
            yield item
