"""Turning a driver's exception into the protocol's error: a gRPC status with exactly one RuntimeError detail.

Messages are redacted with the secrets of the request being served (env values, mount sources, argv) before they
leave the process or reach the provider's stderr.
"""

from __future__ import annotations

import sys
import traceback
from typing import NoReturn

import grpc

from devsy.errors import DevsyError
from devsy.redaction import Redactor
from devsy.runtime.wire.errors import code_of, provider_details
from devsy.runtime.wire.status import RuntimeErrorInfo, to_status

_MAX_RUNTIME_MESSAGE = 2048
_RETRYABLE = {"UNAVAILABLE", "TIMEOUT"}


def _causes(exc: BaseException) -> str:
    parts, seen, cause = [], set(), exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen and len(parts) < 4:
        seen.add(id(cause))
        parts.append(f"{type(cause).__name__}: {cause}".strip())
        cause = cause.__cause__ or cause.__context__
    return " <- ".join(parts)[:_MAX_RUNTIME_MESSAGE]


def error_info(exc: BaseException, redact: Redactor) -> RuntimeErrorInfo:
    code = code_of(exc)
    if isinstance(exc, DevsyError):
        message, hint, kind = exc.message, exc.hint, exc.kind
    else:
        message, hint, kind = (f"unexpected error in the provider ({type(exc).__name__})",
                               "report this to the provider's authors together with its stderr", "")
    return RuntimeErrorInfo(code=code, message=redact(message) or "the runtime failed",
                            runtime_message=redact(_causes(exc)), retryable=code in _RETRYABLE,
                            details=provider_details(kind, redact(hint)))


def log(rpc: str, info: RuntimeErrorInfo, exc: BaseException, redact: Redactor) -> None:
    print(f"{rpc}: {info.code}: {info.message}", file=sys.stderr, flush=True)
    if not isinstance(exc, DevsyError):  # a bug: the traceback is what its authors need (redacted like the rest)
        print(redact("".join(traceback.format_exception(exc))), file=sys.stderr, flush=True)


def abort(context: grpc.ServicerContext, rpc: str, exc: BaseException, redact: Redactor) -> NoReturn:
    """End the RPC with the error's status; never returns."""
    info = error_info(exc, redact)
    log(rpc, info, exc, redact)
    context.abort_with_status(to_status(info))
    raise AssertionError("abort_with_status returned")  # grpc always raises; keeps type checkers honest
