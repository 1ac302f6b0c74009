"""The host reads a provider's error as the Go SDK writes it: a plain gRPC status (no RuntimeError detail) is the
class of its code with its message, extra details of other types are ignored, and only what the protocol itself
forbids (two RuntimeErrors, a code that disagrees with the status) is a protocol error. devsy's own providers still
send exactly one detail, a RuntimeError, which devsy's strict policy (DetailPolicy.DEVSY) checks.

A real gRPC server in this process answers Find with the status the workspace id (JSON) describes; the real host
client (RuntimeClient over a real channel) classifies it. The Go fake runtime is driven the same way where it is.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from devsy.driver.base import ExecRequest, RunOptions
from devsy.errors import AlreadyExists, Cancelled, DevsyError, NotFound
from devsy.redaction import Redactor
from devsy.runtime.conformance.checks import CaseFailed, expect_status
from devsy.runtime.host.client import RuntimeClient
from devsy.runtime.host.rpc_errors import map_rpc_error
from devsy.runtime.sdk.errors import abort
from devsy.runtime.v1 import runtime_pb2 as pb
from devsy.runtime.v1 import runtime_pb2_grpc
from devsy.runtime.wire.errors import InvalidArgument, PermissionDenied, PreconditionFailed, ProviderUnavailable, \
    RuntimeFailure, RuntimeProtocolError, RuntimeTimeout, UnknownRuntimeError, Unsupported
from devsy.runtime.wire.deadline import CallDeadline
from devsy.runtime.wire.status import DetailError, DetailPolicy, from_error

SECRET = "tok-3f9a1c-never-shown"
PROVIDER = "go-style"


def _packed_runtime_error(code: int, message: str) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(pb.RuntimeError(code=code, message=message, details={"hint": "from the detail"}))
    return packed


def _details(names: list[str]) -> list[any_pb2.Any]:
    """Status details by name: a RuntimeError (NOT_FOUND), a well-known google.rpc type, a type nobody knows."""
    out = []
    for name in names:
        if name == "runtime-error":
            out.append(_packed_runtime_error(pb.RUNTIME_ERROR_CODE_NOT_FOUND, "workspace ws-1 does not exist"))
        elif name == "error-info":
            packed = any_pb2.Any()
            packed.Pack(error_details_pb2.ErrorInfo(reason="NO_WORKSPACE", domain="example.test"))
            out.append(packed)
        elif name == "future-code":  # a RuntimeErrorCode from an API newer than this host's
            out.append(_packed_runtime_error(99, "workspace ws-1 is archived"))
        elif name == "unknown-type":
            out.append(any_pb2.Any(type_url="type.googleapis.com/example.v9.Telemetry", value=b"\x08\x96\x01"))
    return out


class _GoStyleFind(runtime_pb2_grpc.RuntimeDriverServicer):
    """Find answers with {"code": GRPC_CODE_NAME, "message": M, "details": [names]} (see _details), or, for
    {"devsy": KIND}, with devsy's own SDK error path."""

    def Find(self, request, context):  # noqa: N802 - gRPC method name
        spec = json.loads(request.workspace_id)
        if "devsy" in spec:
            abort(context, "Find", NotFound(f"no workspace {SECRET}", hint="run devsy up"), Redactor([SECRET]))
        code = grpc.StatusCode[spec["code"]]
        details = _details(spec.get("details", []))
        if not details:  # what Go's status.Error(code, msg) sends: no grpc-status-details-bin at all
            context.abort(code, spec["message"])
        context.abort_with_status(rpc_status.to_status(status_pb2.Status(
            code=code.value[0], message=spec["message"], details=details)))


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[runtime_pb2_grpc.RuntimeDriverStub]:
    socket = tmp_path_factory.mktemp("go-style") / "provider.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    runtime_pb2_grpc.add_RuntimeDriverServicer_to_server(_GoStyleFind(), server)
    server.add_insecure_port(f"unix:{socket}")
    server.start()
    channel = grpc.insecure_channel(f"unix:{socket}")
    try:
        grpc.channel_ready_future(channel).result(timeout=30)
        yield runtime_pb2_grpc.RuntimeDriverStub(channel)
    finally:
        channel.close()
        server.stop(grace=None)


def _host_error(stub: runtime_pb2_grpc.RuntimeDriverStub, **spec: object) -> DevsyError:
    client = RuntimeClient(stub, PROVIDER, Redactor([SECRET]), timeout=30)
    with pytest.raises(DevsyError) as caught:
        client.find(json.dumps(spec))
    return caught.value


def _rpc_error(stub: runtime_pb2_grpc.RuntimeDriverStub, **spec: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        stub.Find(pb.FindRequest(workspace_id=json.dumps(spec)), timeout=30)
    return caught.value


@pytest.mark.parametrize(("code", "cls"), [
    ("NOT_FOUND", NotFound), ("FAILED_PRECONDITION", PreconditionFailed), ("INVALID_ARGUMENT", InvalidArgument),
    ("UNIMPLEMENTED", Unsupported), ("ALREADY_EXISTS", AlreadyExists), ("PERMISSION_DENIED", PermissionDenied),
    ("DEADLINE_EXCEEDED", RuntimeTimeout), ("UNAVAILABLE", ProviderUnavailable), ("CANCELLED", Cancelled),
    ("INTERNAL", RuntimeFailure), ("UNKNOWN", UnknownRuntimeError), ("RESOURCE_EXHAUSTED", UnknownRuntimeError),
])
def test_a_plain_status_is_the_class_of_its_code_with_its_message(stub, code: str, cls: type) -> None:
    error = _host_error(stub, code=code, message=f"the backend said no to {SECRET}")
    assert type(error) is cls, f"{code} without a detail became {type(error).__name__}: {error}"
    assert "the backend said no to ***" in error.message and SECRET not in str(error)
    assert error.hint


def test_a_cancel_from_the_server_after_the_calls_deadline_is_that_deadline(stub) -> None:
    """grpc-go ends a call past its deadline with RST_STREAM(CANCEL); when that beats the client's own timer (a
    loaded machine: the Go fake's exec/deadline case once failed CI so) the call fails CANCELLED. Host and
    conformance suite double-check their deadline, as the gRPC HTTP/2 protocol asks. A real CANCELLED status
    from the server, read against a deadline that has passed and one that has not:"""
    cancelled = _rpc_error(stub, code="CANCELLED", message="context canceled")
    assert cancelled.code() is grpc.StatusCode.CANCELLED
    past, ahead = CallDeadline(0), CallDeadline(60)
    assert past.passed() and not ahead.passed()
    assert type(map_rpc_error(cancelled, PROVIDER, "Find", Redactor(), past)) is RuntimeTimeout
    assert type(map_rpc_error(cancelled, PROVIDER, "Find", Redactor(), ahead)) is Cancelled
    assert type(map_rpc_error(cancelled, PROVIDER, "Find", Redactor())) is Cancelled
    not_found = _rpc_error(stub, code="NOT_FOUND", message="no such workspace")
    assert type(map_rpc_error(not_found, PROVIDER, "Find", Redactor(), past)) is NotFound  # only CANCELLED is read so

    def fails_cancelled() -> None:
        raise cancelled
    expect_status(grpc.StatusCode.DEADLINE_EXCEEDED, fails_cancelled, "an Exec past its deadline", past)
    with pytest.raises(CaseFailed, match="expected DEADLINE_EXCEEDED, got CANCELLED"):
        expect_status(grpc.StatusCode.DEADLINE_EXCEEDED, fails_cancelled, "an Exec past its deadline", ahead)


def test_a_runtime_error_among_other_details_decides_and_the_others_are_ignored(stub) -> None:
    for names in (["error-info", "runtime-error"], ["runtime-error", "unknown-type"],
                  ["unknown-type", "runtime-error", "error-info"]):
        error = _host_error(stub, code="NOT_FOUND", message="status text", details=names)
        assert type(error) is NotFound, (names, error)
        assert (error.message, error.hint) == ("workspace ws-1 does not exist", "from the detail"), names


def test_details_of_unknown_types_alone_are_a_plain_status(stub) -> None:
    error = _host_error(stub, code="FAILED_PRECONDITION", message="workspace is not running",
                        details=["unknown-type", "error-info"])
    assert type(error) is PreconditionFailed and "workspace is not running" in error.message


def test_a_runtime_error_code_from_a_newer_api_is_read_by_its_status_code(stub) -> None:
    error = _host_error(stub, code="NOT_FOUND", message="m", details=["future-code"])
    assert type(error) is NotFound and error.message == "workspace ws-1 is archived"
    with pytest.raises(DetailError, match="does not match"):  # devsy's own providers send only codes they know
        from_error(_rpc_error(stub, code="NOT_FOUND", message="m", details=["future-code"]), DetailPolicy.DEVSY)


def test_a_runtime_error_code_from_a_newer_api_with_a_code_this_host_has_no_name_for_is_unknown(stub) -> None:
    """A newer API's code beside a gRPC code with no RuntimeErrorCode here is read as a plain status of that code
    would be (UNKNOWN), with the detail's message: nothing in it disagrees, it is no malformed status."""
    for code in ("RESOURCE_EXHAUSTED", "ABORTED"):
        error = _host_error(stub, code=code, message="m", details=["future-code"])
        assert type(error) is UnknownRuntimeError and error.message == "workspace ws-1 is archived", (code, error)


def test_a_plain_status_without_a_message_still_says_what_failed(stub) -> None:
    error = _host_error(stub, code="NOT_FOUND", message="")
    assert type(error) is NotFound and error.message == f"provider {PROVIDER} failed Find with NOT_FOUND"


def test_what_the_protocol_forbids_is_still_a_protocol_error(stub) -> None:
    twice = _host_error(stub, code="NOT_FOUND", message="m", details=["runtime-error", "runtime-error"])
    assert type(twice) is RuntimeProtocolError and "at most one RuntimeError" in twice.message
    mismatch = _host_error(stub, code="INTERNAL", message="m", details=["runtime-error"])
    assert type(mismatch) is RuntimeProtocolError and "does not match the gRPC status INTERNAL" in mismatch.message


def test_devsy_policy_is_stricter_and_devsys_own_provider_meets_it(stub) -> None:
    # Go-style statuses are valid protocol but not what devsy's own providers send: the strict reading refuses them.
    extra = _rpc_error(stub, code="NOT_FOUND", message="m", details=["runtime-error", "error-info"])
    assert from_error(extra, DetailPolicy.PROTOCOL).code == "NOT_FOUND"
    with pytest.raises(DetailError, match="exactly one RuntimeError detail, got 2"):
        from_error(extra, DetailPolicy.DEVSY)
    assert from_error(_rpc_error(stub, code="NOT_FOUND", message="m"), DetailPolicy.DEVSY) is None
    own = from_error(_rpc_error(stub, devsy="not-found"), DetailPolicy.DEVSY)
    assert own is not None and (own.code, own.message) == ("NOT_FOUND", "no workspace ***")


def test_devsys_fake_runtime_sends_exactly_one_runtime_error(tmp_path: Path) -> None:
    # devsy policy, checked on a real devsy provider process: Start of a workspace that does not exist.
    from devsy.runtime.host.testing import fake_command, running

    with running(fake_command(tmp_path)) as provider:
        with pytest.raises(grpc.RpcError) as caught:
            provider.plugin.stub.Start(pb.StartRequest(workspace_id="ws-absent"), timeout=30)
    info = from_error(caught.value, DetailPolicy.DEVSY)
    assert info is not None and info.code == "NOT_FOUND" and info.message


# ---- the Go SDK's fake runtime, launched as a host launches any provider ----------------------------------------

def _go_fake(tmp_path: Path, mode: str):
    from go_interop import require_go_binary

    from devsy.runtime.host.launcher import ProviderCommand
    from devsy.runtime.host.testing import running

    binary = require_go_binary("go-fake-runtime")
    return running(ProviderCommand(binary=str(binary), args=["--state-dir", str(tmp_path), "--mode", mode]))


def test_the_go_fakes_plain_invalid_argument_reaches_the_user_typed(tmp_path: Path) -> None:
    # In conformance mode an argv[0] the Go fake has no scenario for is status.Error(InvalidArgument, ...): no detail.
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    with _go_fake(tmp_path, "conformance") as provider:
        provider.client.run_image(ws, RunOptions(image="img"))
        with pytest.raises(InvalidArgument, match="unknown conformance command") as caught:
            provider.client.exec(ws, ExecRequest(argv=["no-such-scenario"], stdout=io.BytesIO(),
                                                 stderr=io.BytesIO()))
        assert caught.value.hint


@pytest.mark.parametrize(("mode", "cls", "message"), [
    ("not-found", NotFound, "workspace does not exist"),
    ("fail-run", RuntimeFailure, "fake image creation failed"),
])
def test_the_go_fakes_failure_modes_are_typed(tmp_path: Path, mode: str, cls: type, message: str) -> None:
    with _go_fake(tmp_path, mode) as provider:
        with pytest.raises(cls, match=message):
            if mode == "not-found":
                assert provider.client.find("ws-1") is None  # Find reports absence without an error
                provider.client.start("ws-1")
            else:
                provider.client.run_image("ws-1", RunOptions(image="img"))
