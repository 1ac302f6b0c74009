"""A RuntimeError inside a canonical gRPC status (google.rpc.Status details), in both directions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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
_PREFIX = "RUNTIME_ERROR_CODE_"


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


class DetailError(ValueError):
    """The status of a failed RPC does not carry exactly one well-formed RuntimeError."""


def from_error(error: grpc.RpcError) -> RuntimeErrorInfo | None:
    """The RuntimeError of a failed call; None when the status has no details at all (a transport failure).

    Raises DetailError when details are present but are not exactly one RuntimeError whose code matches the status.
    """
    try:
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
    except ValueError as exc:
        raise DetailError(f"the status details do not match the status: {exc}") from exc
    if status is None or not status.details:
        return None
    found = [d for d in status.details if d.Is(pb.RuntimeError.DESCRIPTOR)]
    if len(found) != 1 or len(status.details) != 1:
        raise DetailError(f"expected exactly one RuntimeError detail, got {len(status.details)} detail(s) of which "
                          f"{len(found)} RuntimeError")
    detail = pb.RuntimeError()
    found[0].Unpack(detail)
    name = code_name(detail.code) if detail.code in pb.RuntimeErrorCode.values() else "UNKNOWN"
    if GRPC_CODE[name].value[0] != status.code:
        raise DetailError(f"RuntimeError code {name} does not match the gRPC status {status.code}")
    if not detail.message:
        raise DetailError("the RuntimeError has an empty message")
    return RuntimeErrorInfo(code=name, message=detail.message, runtime_message=detail.runtime_message,
                            retryable=detail.retryable, details=dict(detail.details))
