"""`serve(driver, info)`: make any Driver a provider executable speaking Runtime Protocol v1.

`serve_deferred(load)` is the same with the driver made after the handshake line: a provider whose backend SDK is
slow to import checks its options first (so a bad one still exits before the handshake, with its message), then
lets `load` import and build the rest while the host is already connecting.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from devsy.runtime.sdk.plugin_server import refuse_unless_plugin_env, serve_plugin, started_by_host
from devsy.runtime.wire.constants import SERVE_ARG

if TYPE_CHECKING:
    from devsy.driver.base import Driver
    from devsy.runtime.sdk.info import ProviderInfo
    from devsy.runtime.sdk.service import RuntimeService


def serve(driver: Driver, info: ProviderInfo, *, before_line: Callable[[], None] | None = None,
          after_line: Callable[[], None] | None = None, service: RuntimeService | None = None) -> int:
    """Serve `driver` over the go-plugin handshake until the host shuts us down; returns the exit code."""
    return serve_deferred(lambda: service or _runtime_service(driver, info), before_line=before_line,
                          after_line=after_line)


def serve_deferred(load: Callable[[], RuntimeService | tuple[Driver, ProviderInfo]], *,
                   before_line: Callable[[], None] | None = None,
                   after_line: Callable[[], None] | None = None) -> int:
    """Serve what `load` returns (a RuntimeService, or the driver and its info); `load` runs after the handshake
    line, and an exception from it ends the provider with exit code 1 (traceback on stderr)."""
    refuse_unless_plugin_env()

    def register(server: Any) -> None:
        from devsy.runtime.v1 import runtime_pb2_grpc

        loaded = load()
        servicer = _runtime_service(*loaded) if isinstance(loaded, tuple) else loaded
        runtime_pb2_grpc.add_RuntimeDriverServicer_to_server(servicer, server)

    return serve_plugin(register, before_line=before_line, after_line=after_line)


def _runtime_service(driver: Driver, info: ProviderInfo) -> RuntimeService:
    from devsy.runtime.sdk.service import RuntimeService

    return RuntimeService(driver, info)


def require_serve_command(prog: str, argv: list[str]) -> list[str]:
    """The options after `serve`; returns them. Started by a host (the magic cookie is set), `serve` is optional:
    a go-plugin host launches exactly what a provider definition declares, often no arguments at all
    (`external:$(which prog)`). By hand without `serve` it exits 2 with usage."""
    help_asked = argv[:1] in (["-h"], ["--help"])
    if argv[:1] == [SERVE_ARG] or (started_by_host(os.environ) and not help_asked):
        refuse_unless_plugin_env()  # before any backend is touched
        return argv[1:] if argv[:1] == [SERVE_ARG] else argv
    print(f"usage: {prog} [serve] [OPTIONS]\n\n{prog} is a devsy runtime provider: devsy starts it (with a "
          f"handshake environment, and `serve` when its provider row declares it); it is not meant to be run by "
          f"hand. Check one with `devsy-conformance {prog} serve [OPTIONS]`.",
          file=sys.stdout if help_asked else sys.stderr)
    sys.exit(0 if help_asked else 2)
