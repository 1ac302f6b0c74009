"""`serve(driver, info)`: make any Driver a provider executable speaking Runtime Protocol v1."""

from __future__ import annotations

import sys
from collections.abc import Callable

import grpc

from devsy.driver.base import Driver
from devsy.runtime.sdk.plugin_server import refuse_unless_plugin_env, serve_plugin
from devsy.runtime.sdk.info import ProviderInfo
from devsy.runtime.sdk.service import RuntimeService
from devsy.runtime.v1 import runtime_pb2_grpc


def serve(driver: Driver, info: ProviderInfo, *, before_line: Callable[[], None] | None = None,
          after_line: Callable[[], None] | None = None, service: RuntimeService | None = None) -> int:
    """Serve `driver` over the go-plugin handshake until the host shuts us down; returns the exit code."""
    refuse_unless_plugin_env()
    servicer = service or RuntimeService(driver, info)

    def register(server: grpc.Server) -> None:
        runtime_pb2_grpc.add_RuntimeDriverServicer_to_server(servicer, server)

    return serve_plugin(register, before_line=before_line, after_line=after_line)


def require_serve_command(prog: str, argv: list[str]) -> list[str]:
    """Check that argv starts with `serve` (how a host starts us); returns the rest. Exits 2 with usage otherwise."""
    if not argv or argv[0] != "serve":
        help_asked = bool(argv) and argv[0] in ("-h", "--help")
        print(f"usage: {prog} serve [OPTIONS]\n\n{prog} is a devsy runtime provider: devsy starts it (with the "
              f"`serve` argument and a handshake environment); it is not meant to be run by hand. Check one with "
              f"`devsy-conformance {prog} [OPTIONS]`.", file=sys.stdout if help_asked else sys.stderr)
        sys.exit(0 if help_asked else 2)
    refuse_unless_plugin_env()  # before any backend is touched
    return argv[1:]
