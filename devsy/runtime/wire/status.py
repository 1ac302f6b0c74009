"""A RuntimeError inside a canonical gRPC status (google.rpc.Status details), in both directions.

What the protocol allows and what devsy asks of its own providers differ, so decoding takes a DetailPolicy:
- PROTOCOL (Runtime Protocol v1 as the Go SDK speaks it; the host reads every provider so): a status may carry
  details of other types (ignored) and at most one RuntimeError; a status with none is a valid error, classified
  by its gRPC code (CODE_OF_GRPC). A RuntimeError whose code disagrees with the status code (GRPC_CODE), has an
  empty message, or comes twice is malformed, as the Go SDK's conformance suite says too.
- DEVSY (devsy policy, stricter: what devsy's SDK always sends, and what devsy's conformance suite and its own
  providers' tests insist on): exactly one detail, and it is a RuntimeError.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

import grpc
from google.protobuf import any_pb2
from google.rpc import status_pb2
from grpc_status import rpc_status

from devsy.runtime.v1 import runtime_pb2 as pb

GRPC_CODE: dict[str, grpc.StatusCode] = {
    "UNKNOWN": grpc.StatusCode.UNKNOWN,
    "NOT_FOUND": grpc.StatusCode.NOT_FOUND,
    "ALREADY_EXISTS": grpc.StatusCode.ALREADY_EXISTS,
    "INVALID_ARGUMENT": grpc.StatusCode.INVALID_ARGUMENT,
    "UNSUPPORTED": grpc.StatusCode.UNIMPLEMENTED,
    "UNAVAILABLE": grpc.StatusCode.UNAVAILABLE,
    "FAILED_PRECONDITION": grpc.StatusCode.FAILED_PRECONDITION,
    "PERMISSION_DENIED": grpc.StatusCode.PERMISSION_DENIED,
    "TIMEOUT": grpc.StatusCode.DEADLINE_EXCEEDED,
    "CANCELLED": grpc.StatusCode.CANCELLED,
    "RUNTIME_FAILURE": grpc.StatusCode.INTERNAL,
    "INCOMPATIBLE_VERSION": grpc.StatusCode.FAILED_PRECONDITION,
}
# A status without a RuntimeError is classified by its gRPC code: the inverse of GRPC_CODE (the Go SDK's table), in
# which FAILED_PRECONDITION means FAILED_PRECONDITION (only a detail can say INCOMPATIBLE_VERSION). Other gRPC codes
# (RESOURCE_EXHAUSTED, ABORTED, ...) have no RuntimeErrorCode and are UNKNOWN.
CODE_OF_GRPC: dict[grpc.StatusCode, str] = {grpc_code: name for name, grpc_code in GRPC_CODE.items()
                                            if name != "INCOMPATIBLE_VERSION"}
_PREFIX = "RUNTIME_ERROR_CODE_"


class DetailPolicy(Enum):
    """How strictly a failed RPC's status details are read (see the module docstring)."""

    PROTOCOL = "protocol"  # the host, for any provider: Go-style statuses are valid
    DEVSY = "devsy"  # devsy's own providers and devsy's conformance suite: exactly one detail, a RuntimeError


def code_name(value: int) -> str:
    return pb.RuntimeErrorCode.Name(value).removeprefix(_PREFIX)


def code_value(name: str) -> int:
    return pb.RuntimeErrorCode.Value(_PREFIX + name)


@dataclass(frozen=True)
class RuntimeErrorInfo:
    """The decoded RuntimeError detail of a failed RPC."""

    code: str
    message: str
    runtime_message: str = ""
    retryable: bool = False
    details: Mapping[str, str] = field(default_factory=dict)


def to_status(info: RuntimeErrorInfo) -> grpc.Status:
    """A grpc.Status (for `context.abort_with_status`) carrying exactly one RuntimeError detail."""
    detail = pb.RuntimeError(code=code_value(info.code), message=info.message, runtime_message=info.runtime_message,
                             retryable=info.retryable, details=dict(info.details))
    packed = any_pb2.Any()
    packed.Pack(detail)
    grpc_code = GRPC_CODE[info.code]
    status = status_pb2.Status(code=grpc_code.value[0], message=info.message, details=[packed])
    return rpc_status.to_status(status)


def _grpc_code(number: int) -> grpc.StatusCode | None:
    return next((code for code in grpc.StatusCode if code.value[0] == number), None)


class DetailError(ValueError):
    """The status of a failed RPC does not carry exactly one well-formed RuntimeError."""


def from_error(error: grpc.RpcError, policy: DetailPolicy = DetailPolicy.DEVSY) -> RuntimeErrorInfo | None:
    """The RuntimeError of a failed call; None when the status carries none (a transport failure, or under
    PROTOCOL a Go-style status: classify it by its gRPC code, CODE_OF_GRPC).

    Raises DetailError when the details break `policy`, or the RuntimeError's code does not match the status.
    """
    try:
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
    except ValueError as exc:
        raise DetailError(f"the status details do not match the status: {exc}") from exc
    if status is None or not status.details:
        return None
    found = [d for d in status.details if d.Is(pb.RuntimeError.DESCRIPTOR)]
    if policy is DetailPolicy.DEVSY and (len(found) != 1 or len(status.details) != 1):
        raise DetailError(f"expected exactly one RuntimeError detail, got {len(status.details)} detail(s) of which "
                          f"{len(found)} RuntimeError")
    if len(found) > 1:
        raise DetailError(f"expected at most one RuntimeError detail, got {len(found)}")
    if not found:
        return None
    detail = pb.RuntimeError()
    found[0].Unpack(detail)
    grpc_code = _grpc_code(status.code)
    known = detail.code in pb.RuntimeErrorCode.values()
    if known:
        name = code_name(detail.code)
    else:  # a code from a newer API: under PROTOCOL the status code still says what kind of failure it is
        name = CODE_OF_GRPC.get(grpc_code, "UNKNOWN") if policy is DetailPolicy.PROTOCOL else "UNKNOWN"
    # Under PROTOCOL a code this host does not know cannot disagree with the status: a newer API may pair it with a
    # gRPC code that has no RuntimeErrorCode here (RESOURCE_EXHAUSTED, ABORTED, ...), which then reads as UNKNOWN.
    if (known or policy is DetailPolicy.DEVSY) and GRPC_CODE[name] is not grpc_code:
        raise DetailError(f"RuntimeError code {name} does not match the gRPC status "
                          f"{grpc_code.name if grpc_code else status.code}")
    if not detail.message:
        raise DetailError("the RuntimeError has an empty message")
    return RuntimeErrorInfo(code=name, message=detail.message, runtime_message=detail.runtime_message,
                            retryable=detail.retryable, details=dict(detail.details))
