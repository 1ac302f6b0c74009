"""Host side: a failed RPC becomes a typed devsy error, classified by status code and RuntimeError detail only."""

from __future__ import annotations

import grpc

from devsy.errors import Cancelled, DevsyError
from devsy.redaction import Redactor
from devsy.runtime.wire.errors import DETAIL_HINT, LEGACY_DETAIL_KIND, ProviderUnavailable, RuntimeProtocolError, \
    RuntimeTimeout, Unsupported, error_for
from devsy.runtime.wire.status import DetailError, from_error

_AUTHORS = "report this to the provider's authors"


def map_rpc_error(error: grpc.RpcError, provider: str, action: str, redact: Redactor) -> DevsyError:
    code: grpc.StatusCode = error.code()  # type: ignore[attr-defined]
    try:
        info = from_error(error)
    except DetailError as exc:
        return RuntimeProtocolError(f"provider {provider} answered {action} with a malformed error status: {exc}",
                                    hint=_AUTHORS)
    if info is None:
        return _transport_error(code, error, provider, action, redact)
    details = {k: redact(v) for k, v in info.details.items()}
    # The class comes from the code, or from a devsy kind in the details that is compatible with it (error_for).
    return error_for(info.code, redact(info.message), details.get(DETAIL_HINT, ""),
                     kind=details.get(LEGACY_DETAIL_KIND, ""),
                     runtime_message=redact(info.runtime_message), retryable=info.retryable, details=details)


def _transport_error(code: grpc.StatusCode, error: grpc.RpcError, provider: str, action: str,
                     redact: Redactor) -> DevsyError:
    """A status without a RuntimeError: gRPC's own (cancel, deadline, lost connection) or a protocol violation."""
    if code is grpc.StatusCode.CANCELLED:
        return Cancelled(f"{action} was cancelled", hint="rerun the command")
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return RuntimeTimeout(f"{action} did not finish within its deadline (provider {provider})",
                              hint="retry; if it persists, the provider or its backend is hung or overloaded")
    if code is grpc.StatusCode.UNAVAILABLE:
        return ProviderUnavailable(f"provider {provider} became unavailable during {action} (it crashed, was "
                                   "killed, or its connection broke)",
                                   hint="rerun the command; devsy starts a fresh provider each time")
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return Unsupported(f"provider {provider} does not implement {action}",
                           hint="upgrade the provider, or use a feature it advertises")
    text = redact(error.details() or "")  # type: ignore[attr-defined]
    return RuntimeProtocolError(f"provider {provider} failed {action} with {code.name} but without the required "
                                f"RuntimeError detail: {text}", hint=_AUTHORS)
