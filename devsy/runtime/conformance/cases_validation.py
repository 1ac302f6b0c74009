"""Conformance cases that need no instance: requests a provider must refuse before touching its backend, and the
answers about a workspace that does not exist. They run (and must pass) even where no instance can be booted."""

from __future__ import annotations

from devsy.driver.base import MountType
from devsy.runtime.conformance.cases_lifecycle import describe
from devsy.runtime.conformance.checks import check, expect_error
from devsy.runtime.conformance.session import UNARY_TIMEOUT_S, Session
from devsy.runtime.wire.convert import MOUNT_TYPE_TO_PB
from devsy.runtime.v1 import runtime_pb2 as pb


def _invalid_requests(session: Session, ws: str) -> dict[str, pb.RunImageRequest]:
    def request(**fields: object) -> pb.RunImageRequest:
        base = session.run_request(ws)
        base.MergeFrom(pb.RunImageRequest(**fields))
        return base

    no_image = session.run_request(ws)
    no_image.image = ""
    bad_id = session.run_request(ws)
    bad_id.workspace_id = "../escape"
    cases = {
        "a request without an image": no_image,
        "a workspace id that is not 1-128 of [A-Za-z0-9_.-]": bad_id,
        "a mount without a type": request(mounts=[pb.Mount(type=pb.MOUNT_TYPE_UNSPECIFIED, target="/data")]),
        "an environment variable name containing '='": request(environment={"A=B": "x"}),
    }
    # Mount cases use a type the provider offers: an unoffered one is UNSUPPORTED before its fields are read.
    offered = describe(session, opt_in=True).capabilities.mount_types
    if offered:
        cases["a mount with a relative target"] = request(
            mounts=[pb.Mount(type=MOUNT_TYPE_TO_PB[offered[0]], source="/tmp", target="relative")])
    if MountType.BIND in offered:
        cases["a bind mount without an absolute source"] = request(
            mounts=[pb.Mount(type=pb.MOUNT_TYPE_BIND, source="relative/dir", target="/data")])
    return cases


def case_invalid_requests(session: Session) -> str:
    """Invalid RunImage requests are INVALID_ARGUMENT (with or without allow_recreate) and create nothing."""
    ws = session.workspace_id("invalid")
    session.on_cleanup(f"delete workspace {ws}",
                       lambda: session.stub.Delete(pb.DeleteRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S))
    cases = _invalid_requests(session, ws)
    for what, request in cases.items():
        for permission in (False, True):
            request.allow_recreate = permission
            expect_error("INVALID_ARGUMENT", lambda r=request: session.stub.RunImage(r, timeout=UNARY_TIMEOUT_S),
                         f"RunImage with {what}{' (allow_recreate)' if permission else ''}")
    check(not session.find(ws).found, "a rejected RunImage left a workspace behind")
    return f"{len(cases)} invalid requests rejected, with and without allow_recreate; nothing created"


def case_absent_workspace(session: Session) -> str:
    """A never-created workspace: Find says absent, Start is NOT_FOUND, Delete succeeds (twice), and
    ReusePreflight (if advertised) is NOT_FOUND; nothing is created by asking."""
    ws = session.workspace_id("absent")
    stub = session.stub
    check(not session.find(ws).found, "Find reports a workspace that was never created")
    info = expect_error("NOT_FOUND", lambda: stub.Start(pb.StartRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S),
                        "Start of a workspace that was never created")
    check(bool(info.message), "Start of a missing workspace: the RuntimeError has no message")
    for attempt in ("first", "second"):
        stub.Delete(pb.DeleteRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S)
        check(not session.find(ws).found, f"{attempt} Delete of a missing workspace made it appear")
    if not describe(session, opt_in=True).capabilities.reuse_preflight:
        return "Find absent, Start NOT_FOUND, Delete idempotent (ReusePreflight not advertised)"
    expect_error("NOT_FOUND", lambda: stub.ReusePreflight(
        pb.ReusePreflightRequest(workspace_id=ws, remote_user=session.target.remote_user), timeout=UNARY_TIMEOUT_S),
        "ReusePreflight of a workspace that was never created")
    check(not session.find(ws).found, "ReusePreflight of a missing workspace made it appear")
    return "Find absent, Start NOT_FOUND, Delete idempotent, ReusePreflight NOT_FOUND"
