"""A provider process whose Find fails with the error its request describes, to test error kinds over real gRPC.

The workspace id is JSON. {"raise": KIND, "message": M, "hint": H, "secret": S} raises devsy's registered class of
KIND through the SDK's own error path (redacting S, as a real provider redacts its request's secrets);
{"code": C, "message": M, "details": {...}} answers a hand-made RuntimeError, as a foreign or hostile provider can.
"""

from __future__ import annotations

import json
import sys

from devsy.errors import error_class
from devsy.redaction import Redactor
from devsy.runtime.sdk.errors import abort
from devsy.runtime.sdk.plugin_server import serve_plugin
from devsy.runtime.v1 import runtime_pb2_grpc
from devsy.runtime.wire.status import RuntimeErrorInfo, to_status


class _FailingFind(runtime_pb2_grpc.RuntimeDriverServicer):
    def Find(self, request, context):  # noqa: N802 - gRPC method name
        spec = json.loads(request.workspace_id)
        if "raise" in spec:
            cls = error_class(spec["raise"])
            assert cls is not None, f"no registered kind {spec['raise']!r} in the provider"
            abort(context, "Find", cls(spec["message"], hint=spec.get("hint", "")), Redactor([spec.get("secret", "")]))
        context.abort_with_status(to_status(RuntimeErrorInfo(code=spec["code"], message=spec["message"],
                                                             details=spec.get("details", {}))))


def main() -> int:
    return serve_plugin(lambda server: runtime_pb2_grpc.add_RuntimeDriverServicer_to_server(_FailingFind(), server))


if __name__ == "__main__":
    sys.exit(main())
