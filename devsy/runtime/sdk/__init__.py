"""Provider SDK: `serve(driver, info)` turns any devsy Driver into a Runtime Protocol v1 provider executable."""

from devsy.runtime.sdk.info import ProviderInfo
from devsy.runtime.sdk.serve import require_serve_command, serve, serve_deferred

__all__ = ["ProviderInfo", "require_serve_command", "serve", "serve_deferred"]
