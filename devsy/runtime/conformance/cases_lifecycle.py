"""Conformance cases: Info, discovery, lifecycle, reuse preflight, recreate-on-run, logs."""

from __future__ import annotations

import grpc

from devsy.arch import SUPPORTED
from devsy.bounded_wait import WaitTimeout, poll_until
from devsy.runtime.conformance.checks import CaseSkipped, check, expect_error, expect_status
from devsy.runtime.conformance.session import UNARY_TIMEOUT_S, Session
from devsy.runtime.wire.errors import InvalidProviderInfo, IncompatibleVersion
from devsy.runtime.host.info_check import ProviderDescription, validate_info
from devsy.runtime.v1 import runtime_pb2 as pb

_LOGS_WAIT_S = 30.0
_DIFFERENT_USER = "devsy-conformance-other"
_CANCEL_ATTEMPTS = 10


def describe(session: Session, *, opt_in: bool) -> ProviderDescription:
    reply = session.stub.Info(pb.InfoRequest(supports_recreate_on_run=opt_in), timeout=UNARY_TIMEOUT_S)
    return validate_info(reply, session.provider_name, opted_in_on_run=opt_in)


def case_info(session: Session) -> str:
    """Info passes the host's validation, with and without the ON_RUN opt-in; ON_RUN only to an opted-in host."""
    try:
        old_host = describe(session, opt_in=False)
        new_host = describe(session, opt_in=True)
    except (InvalidProviderInfo, IncompatibleVersion) as exc:
        raise AssertionError(exc.message) from None
    check(old_host.recreate_mode != "on-run", "ON_RUN advertised to a host that did not opt in")
    return (f"{new_host.driver_name} {new_host.driver_version} on {new_host.runtime_name} API 1.{new_host.api_minor}; "
            f"recreate {new_host.recreate_mode}, reuse preflight {new_host.capabilities.reuse_preflight}, "
            f"logs {new_host.capabilities.logs}")


def case_discovery(session: Session) -> str:
    """TargetArchitecture answers before the workspace exists."""
    reply = session.stub.TargetArchitecture(
        pb.TargetArchitectureRequest(workspace_id=session.workspace_id("never-created")), timeout=UNARY_TIMEOUT_S)
    check(reply.architecture in SUPPORTED, f"architecture {reply.architecture!r} is not amd64 or arm64")
    return reply.architecture


def case_lifecycle(session: Session) -> None:
    """absent -> create -> running; stop twice; Exec while stopped = FAILED_PRECONDITION; start twice; delete twice;
    start after delete = NOT_FOUND."""
    ws = session.workspace_id("life")
    stub = session.stub
    check(not session.find(ws).found, "Find reports a workspace that was never created")
    session.create(ws)
    expect_error("ALREADY_EXISTS", lambda: stub.RunImage(session.run_request(ws), timeout=UNARY_TIMEOUT_S),
                 "RunImage on an existing workspace")
    for attempt in ("first", "second"):
        stub.Stop(pb.StopRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S)
        session.require_status(ws, "stopped", f"{attempt} Stop")
    # A command in a stopped workspace is refused (never started implicitly), as the Go SDK fake refuses it.
    expect_error("FAILED_PRECONDITION", lambda: session.exec(session.commands.noop, workspace_id=ws),
                 "Exec in a stopped workspace")
    session.require_status(ws, "stopped", "after an Exec in the stopped workspace")
    for attempt in ("first", "second"):
        stub.Start(pb.StartRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S)
        session.require_status(ws, "running", f"{attempt} Start")
    for attempt in ("first", "second"):
        stub.Delete(pb.DeleteRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S)
        check(not session.find(ws).found, f"{attempt} Delete: Find still reports the workspace")
    info = expect_error("NOT_FOUND", lambda: stub.Start(pb.StartRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S),
                        "Start after Delete", detail_required=True)  # as the Go SDK suite requires
    check(bool(info and info.message), "Start after Delete: the RuntimeError has no message")


def _snapshot(session: Session, ws: str) -> tuple[str, str, str]:
    found = session.find(ws)
    check(found.found, f"workspace {ws} disappeared")
    return found.container.id, found.container.state.status, found.container.state.started_at


def case_reuse_preflight(session: Session) -> str:
    """Succeeds for the creating user, read-only, other user = FAILED_PRECONDITION, missing = NOT_FOUND,
    cancelled context = CANCELLED."""
    if not describe(session, opt_in=True).capabilities.reuse_preflight:
        raise CaseSkipped("the provider does not advertise reuse_preflight")
    ws = session.workspace_id("reuse")
    stub = session.stub
    session.create(ws)
    request = pb.ReusePreflightRequest(workspace_id=ws, remote_user=session.target.remote_user)
    before = _snapshot(session, ws)
    stub.ReusePreflight(request, timeout=UNARY_TIMEOUT_S)
    check(_snapshot(session, ws) == before, "ReusePreflight changed the workspace")
    expect_error("FAILED_PRECONDITION", lambda: stub.ReusePreflight(
        pb.ReusePreflightRequest(workspace_id=ws, remote_user=_DIFFERENT_USER), timeout=UNARY_TIMEOUT_S),
        "ReusePreflight for a different developer identity")
    check(_snapshot(session, ws) == before, "a refused ReusePreflight changed the workspace")
    expect_error("NOT_FOUND", lambda: stub.ReusePreflight(
        pb.ReusePreflightRequest(workspace_id=session.workspace_id("reuse-missing"), remote_user="root"),
        timeout=UNARY_TIMEOUT_S), "ReusePreflight of a missing workspace")
    cancelled = 0
    for _ in range(_CANCEL_ATTEMPTS):
        # A call cancelled right after it starts: usually CANCELLED; a fast provider may already have answered OK.
        future = stub.ReusePreflight.future(request, timeout=UNARY_TIMEOUT_S)
        future.cancel()
        code = future.code()
        check(code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.OK), f"a cancelled ReusePreflight ended {code}")
        cancelled += code is grpc.StatusCode.CANCELLED
    check(cancelled > 0, f"none of {_CANCEL_ATTEMPTS} cancelled ReusePreflight calls ended CANCELLED")
    check(_snapshot(session, ws) == before, "a cancelled ReusePreflight changed the workspace")
    return f"read-only, refuses another identity, {cancelled}/{_CANCEL_ATTEMPTS} cancels observed"


def _recreate_target(session: Session, name: str, *, stopped: bool) -> None:
    stub = session.stub
    ws = session.workspace_id(name)
    old = session.create(ws)
    if stopped:
        stub.Stop(pb.StopRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S)
        session.require_status(ws, "stopped", "Stop before replacement")
    status = "stopped" if stopped else "running"
    expect_error("ALREADY_EXISTS", lambda: stub.RunImage(session.run_request(ws), timeout=UNARY_TIMEOUT_S),
                 f"RunImage without permission on a {status} workspace")
    check(session.require_status(ws, status, "after a refused RunImage").id == old.id,
          "a RunImage without permission replaced the workspace")
    invalid = session.run_request(ws, allow_recreate=True)
    invalid.mounts.append(pb.Mount(type=pb.MOUNT_TYPE_UNSPECIFIED, target="relative/path"))
    expect_error("INVALID_ARGUMENT", lambda: stub.RunImage(invalid, timeout=UNARY_TIMEOUT_S),
                 f"an invalid authorized replacement of a {status} workspace")
    check(session.require_status(ws, status, "after an invalid replacement").id == old.id,
          "an invalid replacement changed the workspace")
    stub.RunImage(session.run_request(ws, allow_recreate=True), timeout=UNARY_TIMEOUT_S)
    new = session.require_status(ws, "running", f"after replacing a {status} workspace")
    check(new.id != old.id, "the authorized replacement kept the old instance")


def case_recreate_on_run(session: Session) -> str:
    """Running and stopped targets, no permission = ALREADY_EXISTS, invalid request changes nothing, valid
    replacement, and the result survives a provider restart (where nothing negotiated carries over)."""
    if not describe(session, opt_in=True).recreate_on_run:
        raise CaseSkipped("the provider does not offer recreate mode ON_RUN to an opted-in host")
    _recreate_target(session, "rec-run", stopped=False)
    _recreate_target(session, "rec-stop", stopped=True)
    ws = session.workspace_id("rec-run")
    replaced = session.require_status(ws, "running", "before the provider restart").id
    session.restart()
    check(session.require_status(ws, "running", "after the provider restart").id == replaced,
          "a fresh provider process does not see the replaced workspace")
    expect_error("ALREADY_EXISTS", lambda: session.stub.RunImage(session.run_request(ws), timeout=UNARY_TIMEOUT_S),
                 "RunImage without permission in a fresh provider process")
    return "running and stopped targets replaced; survives restart"


def case_logs(session: Session) -> None:
    """Logs returns the workload's exact bytes and the stream ends."""
    if not describe(session, opt_in=True).capabilities.logs:
        expect_status(grpc.StatusCode.UNIMPLEMENTED, lambda: list(session.stub.Logs(
            pb.LogsRequest(workspace_id=session.exec_workspace()), timeout=UNARY_TIMEOUT_S)),
            "Logs on a provider without the logs capability")
        raise CaseSkipped("the provider does not advertise logs (it answers UNSUPPORTED, as it must)")
    ws = session.exec_workspace()

    def logs() -> bytes:
        chunks = list(session.stub.Logs(pb.LogsRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S))
        check(all(1 <= len(chunk.data) <= 32768 for chunk in chunks), "a logs frame outside 1..32768 bytes")
        return b"".join(chunk.data for chunk in chunks)

    # The workload writes its line right after it starts; a backend may take a moment to record it.
    try:
        data = poll_until(logs, bool, timeout=_LOGS_WAIT_S, interval=0.2, what="the workload's logs")
    except WaitTimeout as exc:
        data = exc.last  # the check below says what was expected
    expected = session.commands.logs
    check(data == expected, f"logs {data!r} != expected {expected!r}")
