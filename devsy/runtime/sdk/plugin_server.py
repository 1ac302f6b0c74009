"""The provider side of the go-plugin handshake: check the cookie, listen on a unix socket, print the one line.

Besides the provider's services the server carries what a go-plugin host expects: gRPC health (`plugin` SERVING),
`plugin.GRPCController/Shutdown` and `plugin.GRPCStdio`, which carries what the provider prints on `sys.stdout`
after the handshake, as go-plugin does with a Go provider's os.Stdout (stdio_stream.py).

The line is printed as soon as that server listens and answers (a host dials once, right after reading it, and
does not retry a refused connection): every service, go-plugin's three included, is registered just after it, so
that their imports (protobuf and its messages, the backend's SDK) are not paid before the line; only gRPC itself is.
go-plugin's three come first and answer as soon as they are registered (a host's health check need not wait for the
backend's SDK). An RPC that arrives before its service is registered waits for it (deferred.py), so the host sees a
slower first answer, never a missing method.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from concurrent import futures
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from devsy.runtime.wire.constants import APP_PROTOCOL_VERSION, COOKIE_KEY, COOKIE_VALUE, ENV_CLIENT_CERT, \
    ENV_PROTOCOL_VERSIONS, ENV_SOCKET_DIR, HEALTH_SERVICE, NOT_A_PLUGIN_MESSAGE
from devsy.runtime.sdk.deferred import DeferredServices
from devsy.runtime.wire.handshake import unix_line

if TYPE_CHECKING:  # imported after the handshake line (see the module docstring)
    from devsy.runtime.sdk.stdio_stream import StdioStream

# Unix socket paths are limited to 108 bytes (sun_path) on Linux, including the terminating NUL.
_MAX_SOCKET_PATH = 107
# Exec streams hold a worker each for their lifetime; enough that a stalled stream never starves other RPCs.
DEFAULT_WORKERS = 64
_STOP_GRACE_S = 5.0


class PluginEnvError(Exception):
    """The environment does not allow serving (no cookie, no common protocol version)."""


def check_plugin_env(environ: Mapping[str, str]) -> None:
    """Refuse to serve without the cookie, or when the host accepts no protocol version we speak."""
    if environ.get(COOKIE_KEY) != COOKIE_VALUE:
        raise PluginEnvError(f"{NOT_A_PLUGIN_MESSAGE} (missing or wrong {COOKIE_KEY}).")
    versions = environ.get(ENV_PROTOCOL_VERSIONS, "")
    # Like go-plugin, an absent list means a legacy host that accepts our one version.
    if versions and str(APP_PROTOCOL_VERSION) not in [v.strip() for v in versions.split(",")]:
        raise PluginEnvError(f"Incompatible API version with plugin. Plugin version: {APP_PROTOCOL_VERSION}, "
                             f"Client versions: {versions}")
    if environ.get(ENV_CLIENT_CERT):
        raise PluginEnvError(f"{ENV_CLIENT_CERT} is set but this provider does not support go-plugin auto-mTLS; "
                             "the host must connect over its private unix socket directory instead")


def started_by_host(environ: Mapping[str, str]) -> bool:
    """Whether a plugin host started us: the cookie variable is set (a wrong value is then refused as go-plugin
    does)."""
    return COOKIE_KEY in environ


def refuse_unless_plugin_env() -> None:
    """Exit 1 with the reason on stderr unless started by a host (stdout stays empty)."""
    try:
        check_plugin_env(os.environ)
    except PluginEnvError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)


def _socket_path() -> tuple[Path, Path]:
    base = os.environ.get(ENV_SOCKET_DIR) or None
    directory = Path(tempfile.mkdtemp(prefix="plugin", dir=base))
    path = directory / "plugin.sock"
    if len(str(path).encode()) > _MAX_SOCKET_PATH:
        shutil.rmtree(directory, ignore_errors=True)
        raise PluginEnvError(f"the socket path {path} is longer than a unix socket allows; set {ENV_SOCKET_DIR} "
                             "to a shorter directory")
    return directory, path


def serve_plugin(register: Callable[[DeferredServices], None], *, max_workers: int = DEFAULT_WORKERS,
                 before_line: Callable[[], None] | None = None, after_line: Callable[[], None] | None = None) -> int:
    """Serve until GRPCController.Shutdown or SIGTERM; returns the process exit code. `register` adds the
    provider's services; it runs after the handshake line (its imports are not paid before it), and an exception
    from it ends the provider with exit code 1 and the traceback on stderr, as a crash before the line did."""
    refuse_unless_plugin_env()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host owns our lifetime; a terminal ^C is for the host
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        directory, path = _socket_path()
    except (OSError, PluginEnvError) as exc:
        print(f"cannot create the plugin socket: {exc}", file=sys.stderr)
        return 1
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="rpc"))
    services = DeferredServices()
    server.add_generic_rpc_handlers((services,))
    plumbing = _Plumbing(stop)
    code = 0
    try:
        server.add_insecure_port(f"unix:{path}")
        server.start()
        if before_line is not None:
            before_line()
        _print_line(unix_line(str(path)).format())
        if after_line is not None:
            after_line()
        if services.load(register, early=plumbing.register):
            stop.wait()
        else:
            code = 1
    finally:
        plumbing.close()
        server.stop(_STOP_GRACE_S).wait(_STOP_GRACE_S + 1)
        shutil.rmtree(directory, ignore_errors=True)
    return code


class _Plumbing:
    """What a go-plugin host expects beside the provider's services: health, the controller's Shutdown (sets
    `stop`) and the stdio stream, which from now on carries what the provider prints on sys.stdout."""

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop
        self._health: Any = None
        self._stdio: StdioStream | None = None

    def register(self, target: DeferredServices) -> None:
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc

        from devsy.runtime.goplugin import grpc_controller_pb2, grpc_controller_pb2_grpc, grpc_stdio_pb2_grpc
        from devsy.runtime.sdk.stdio_stream import StdioServicer, StdioStream, stdout_writer

        self._health = health.HealthServicer()
        for name in (HEALTH_SERVICE, ""):
            self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, target)
        controller = _Controller(self._stop, grpc_controller_pb2.Empty)
        grpc_controller_pb2_grpc.add_GRPCControllerServicer_to_server(controller, target)
        self._stdio = StdioStream()
        grpc_stdio_pb2_grpc.add_GRPCStdioServicer_to_server(StdioServicer(self._stdio), target)
        sys.stdout = stdout_writer(self._stdio)

    def close(self) -> None:
        if self._stdio is not None:
            self._stdio.close()  # ends the host's stream (EOF) and releases a writer blocked on it
        if self._health is not None:
            self._health.enter_graceful_shutdown()


class _Controller:
    """plugin.GRPCController: its one method, Shutdown, ends the provider."""

    def __init__(self, stop: threading.Event, empty: Callable[[], Any]) -> None:
        self._stop, self._empty = stop, empty

    def Shutdown(self, request, context):  # noqa: N802 - gRPC method name
        self._stop.set()
        return self._empty()


def _print_line(line: str) -> None:
    """Write the handshake line on fd 1, then point fd 1 at stderr: nothing else may land on the handshake pipe (what
    the provider prints on sys.stdout goes to the stdio stream once it is served, as go-plugin does with os.Stdout)."""
    data = (line + "\n").encode()
    while data:
        data = data[os.write(1, data):]
    os.dup2(2, 1)
