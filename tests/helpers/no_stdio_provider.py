"""A go-plugin provider from before go-plugin had a stdio stream: health and the runtime service, no GRPCStdio.

A host must take its Unimplemented as "nothing to drain", quietly. It serves until the host's lease ends it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from devsy.runtime.sdk.plugin_server import refuse_unless_plugin_env
from devsy.runtime.v1 import runtime_pb2_grpc
from devsy.runtime.wire.constants import ENV_SOCKET_DIR, HEALTH_SERVICE
from devsy.runtime.wire.handshake import unix_line


def main() -> int:
    refuse_unless_plugin_env()
    path = Path(tempfile.mkdtemp(dir=os.environ.get(ENV_SOCKET_DIR))) / "plugin.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    checks = health.HealthServicer()
    checks.set(HEALTH_SERVICE, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    runtime_pb2_grpc.add_RuntimeDriverServicer_to_server(runtime_pb2_grpc.RuntimeDriverServicer(), server)
    server.add_insecure_port(f"unix:{path}")
    server.start()
    print(unix_line(str(path)).format(), flush=True)
    threading.Event().wait()  # the supervisor's teardown ends us
    return 0


if __name__ == "__main__":
    sys.exit(main())
