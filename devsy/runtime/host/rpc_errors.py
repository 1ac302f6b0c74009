"""Host side: a failed RPC becomes a typed devsy error, classified by status code and RuntimeError detail only.

Strictness is split between the protocol and devsy policy (devsy.runtime.wire.status.DetailPolicy):
- The host reads every provider by the protocol, as the Go SDK speaks it (DetailPolicy.PROTOCOL): the RuntimeError
  detail, when there is one, decides the class (with a compatible devsy kind, see wire.errors.error_for); details
  of other types are ignored; a status without a RuntimeError (what Go providers often send, e.g.
  `status.Error(codes.NotFound, "...")`) is classified by its gRPC code exactly as the same code with a detail
  would be (NOT_FOUND -> NotFound, FAILED_PRECONDITION -> PreconditionFailed, INVALID_ARGUMENT -> InvalidArgument,
  UNIMPLEMENTED -> Unsupported, DEADLINE_EXCEEDED -> RuntimeTimeout, UNAVAILABLE -> ProviderUnavailable,
  CANCELLED -> Cancelled, INTERNAL -> RuntimeFailure, ...), keeping the status message (redacted). Only what the
  Go SDK's conformance suite also rejects is a protocol error here: two RuntimeError details, one whose code
  disagrees with the status code, or one with an empty message.
- devsy's own providers always send exactly one detail, a RuntimeError (devsy.runtime.sdk.errors); that is devsy
  policy, checked by devsy's conformance suite and its providers' tests (DetailPolicy.DEVSY), not required of
  other providers by the host.
"""

from __future__ import annotations

import grpc

from devsy.errors import Cancelled, DevsyError
from devsy.redaction import Redactor
from devsy.runtime.wire.errors import DETAIL_HINT, LEGACY_DETAIL_KIND, ProviderUnavailable, RuntimeProtocolError, \
    RuntimeTimeout, Unsupported, error_for
from devsy.runtime.wire.deadline import CallDeadline
from devsy.runtime.wire.status import CODE_OF_GRPC, DetailError, DetailPolicy, from_error

_AUTHORS = "report this to the provider's authors"
# What to do about a plain status (no RuntimeError, so no hint from the provider), by its RuntimeErrorCode.
_PLAIN_HINT = {
    "NOT_FOUND": "check that the workspace still exists in the provider's backend; `devsy up` creates it again",
    "ALREADY_EXISTS": "delete the existing instance (`devsy delete`), or reuse it with `devsy up`",
    "INVALID_ARGUMENT": "check the devcontainer configuration and provider options for a value the provider refuses",
    "FAILED_PRECONDITION": "bring the workspace into the state this needs (e.g. `devsy start`), or recreate it "
                           "with `devsy up --recreate`",
    "PERMISSION_DENIED": "check the provider's access to its backend",
}
_PLAIN_DEFAULT_HINT = f"the provider's message is all it said (a plain gRPC status); if it is unclear, {_AUTHORS}"


def map_rpc_error(error: grpc.RpcError, provider: str, action: str, redact: Redactor,
                  deadline: CallDeadline | None = None) -> DevsyError:
    """`deadline`, when the call had one, tells a server's deadline cancel (CANCELLED) from a cancel."""
    code = deadline.code(error) if deadline is not None else error.code()  # type: ignore[attr-defined]
    try:
        info = from_error(error, DetailPolicy.PROTOCOL)
    except DetailError as exc:
        return RuntimeProtocolError(f"provider {provider} answered {action} with a malformed error status: {exc}",
                                    hint=_AUTHORS)
    if info is None:
        return _plain_status_error(code, error, provider, action, redact)
    details = {k: redact(v) for k, v in info.details.items()}
    # The class comes from the code, or from a devsy kind in the details that is compatible with it (error_for).
    return error_for(info.code, redact(info.message), details.get(DETAIL_HINT, ""),
                     kind=details.get(LEGACY_DETAIL_KIND, ""),
                     runtime_message=redact(info.runtime_message), retryable=info.retryable, details=details)


def _plain_status_error(code: grpc.StatusCode, error: grpc.RpcError, provider: str, action: str,
                        redact: Redactor) -> DevsyError:
    """A status without a RuntimeError: gRPC's own (cancel, deadline, lost connection, a method the provider lacks)
    or a Go-style provider error; either way the class of its code, with its message."""
    text = redact(error.details() or "")  # type: ignore[attr-defined]
    said = f": {text}" if text else ""
    # These codes are also what gRPC itself reports; their messages cover that case and keep the provider's text.
    if code is grpc.StatusCode.CANCELLED:
        return Cancelled(f"{action} was cancelled{said}", hint="rerun the command")
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return RuntimeTimeout(f"{action} did not finish within its deadline (provider {provider}){said}",
                              hint="retry; if it persists, the provider or its backend is hung or overloaded")
    if code is grpc.StatusCode.UNAVAILABLE:
        return ProviderUnavailable(f"provider {provider} became unavailable during {action} (it crashed, was "
                                   f"killed, its connection broke, or its backend is down){said}",
                                   hint="rerun the command; devsy starts a fresh provider each time")
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return Unsupported(f"provider {provider} does not implement {action}{said}",
                           hint="upgrade the provider, or use a feature it advertises")
    name = CODE_OF_GRPC.get(code, "UNKNOWN")
    message = f"provider {provider} failed {action}{said}" if text else \
        f"provider {provider} failed {action} with {code.name}"
    return error_for(name, message, _PLAIN_HINT.get(name, _PLAIN_DEFAULT_HINT))
