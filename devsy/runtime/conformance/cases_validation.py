"""Conformance cases that need no instance: requests a provider must refuse before touching its backend, and the
answers about a workspace that does not exist. They run (and must pass) even where no instance can be booted."""

from __future__ import annotations

from devsy.driver.base import MountType
from devsy.runtime.conformance.cases_lifecycle import describe
from devsy.runtime.conformance.checks import CaseFailed, check, expect_error, policy
from devsy.runtime.conformance.session import UNARY_TIMEOUT_S, Session
from devsy.runtime.wire.convert import MOUNT_TYPE_TO_PB
from devsy.runtime.v1 import runtime_pb2 as pb


_BAD_ID = "../escape"


def _invalid_requests(session: Session, ws: str) -> dict[str, pb.RunImageRequest]:
    def request(**fields: object) -> pb.RunImageRequest:
        base = session.run_request(ws)
        base.MergeFrom(pb.RunImageRequest(**fields))
        return base

    no_image = session.run_request(ws)
    no_image.image = ""
    bad_id = session.run_request(ws)
    bad_id.workspace_id = _BAD_ID
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


# The protocol (the Go SDK and its fake) requires only an image; it puts no limit on workspace ids (the Go suite's
# own ids may hold any character) and leaves the other checks to the runtime. devsy's own providers refuse them all
# up front: devsy policy, checked for devsy's providers only.
_PROTOCOL_INVALID = ("a request without an image",)


def case_invalid_requests(session: Session) -> str:
    """Invalid RunImage requests are INVALID_ARGUMENT (with or without allow_recreate) and create nothing."""
    ws = session.workspace_id("invalid")
    session.on_cleanup(f"delete workspace {ws}",
                       lambda: session.stub.Delete(pb.DeleteRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S))
    cases = _invalid_requests(session, ws)
    for what, request in cases.items():
        for permission in (False, True):
            request.allow_recreate = permission
            label = f"RunImage with {what}{' (allow_recreate)' if permission else ''}"
            call = lambda r=request: session.stub.RunImage(r, timeout=UNARY_TIMEOUT_S)  # noqa: E731
            if what in _PROTOCOL_INVALID:
                expect_error("INVALID_ARGUMENT", call, label)
                continue
            try:
                expect_error("INVALID_ARGUMENT", call, label)
            except CaseFailed as exc:
                policy(False, str(exc))
                # An accepted request created a workspace: remove it, so the next request is judged on its own.
                session.stub.Delete(pb.DeleteRequest(workspace_id=request.workspace_id), timeout=UNARY_TIMEOUT_S)
                break  # the allow_recreate variant says nothing more
    check(not session.find(ws).found, "a rejected RunImage left a workspace behind")
    return f"{len(cases)} invalid requests rejected, with and without allow_recreate; nothing created"


def case_absent_workspace(session: Session) -> str:
    """A never-created workspace: Find says absent, Start is NOT_FOUND, Delete succeeds (twice), and
    ReusePreflight (if advertised) is NOT_FOUND; nothing is created by asking."""
    ws = session.workspace_id("absent")
    stub = session.stub
    check(not session.find(ws).found, "Find reports a workspace that was never created")
    info = expect_error("NOT_FOUND", lambda: stub.Start(pb.StartRequest(workspace_id=ws), timeout=UNARY_TIMEOUT_S),
                        "Start of a workspace that was never created", detail_required=True)
    check(bool(info and info.message), "Start of a missing workspace: the RuntimeError has no message")
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
