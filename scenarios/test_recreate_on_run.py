"""recreate-on-run: external providers (Runtime Protocol API 1.3, recreate mode ON_RUN) replace an existing
workspace only when a request carries permission (CATALOGUE.md; shared/PROTOCOL.md "API 1.3").

Workspaces are made and replaced through the real devsy CLI (`up`, `up --recreate`, `stop`), which is how a user
grants permission: per request, with `--recreate`. Two rules cannot be provoked through the CLI, because devsy never
sends RunImage for an existing workspace without permission, and a fresh devsy command is always a fresh provider
process: so `unauthorized-duplicate` and `survives-restart` (and the protocol half of `invalid-authorized`) speak
the protocol to the provider executable itself, launched exactly as devsy launches it for `--provider NAME` (same
executable, same options, devsy's supervisor, handshake and runtime client; harness.provider_process). That
executable is the contract under test, so this is the honest way to ask it; `devsy-conformance` asks the same
questions about workspaces it creates itself, these ask them about workspaces devsy created.
"""

from __future__ import annotations

from harness import case
from harness.backends import BackendInspector
from harness.case_context import CaseContext
from harness.devsy_handle import DevsyHandle
from harness.outcome import WorkspaceView
from harness.provider_process import MountSpec, ProviderRefused, provider_process
from harness.providers import Provider
from scenarios.support import (
    GUEST_IMAGE,
    assert_running,
    local_source,
    only_instance,
    put_marker,
    read_marker,
    record_path,
    snapshot,
    tree_digest,
    write_config,
)


def _same_instance(a: WorkspaceView, b: WorkspaceView) -> bool:
    return a.instance is not None and b.instance is not None and \
        (a.instance.id, a.instance.created_at) == (b.instance.id, b.instance.created_at)


def _replaced_only_with_permission(case: CaseContext, devsy: DevsyHandle, backend: BackendInspector, *,
                                   stopped: bool) -> None:
    source = local_source(case)
    wid = case.workspace_id()
    first = devsy.up(source, wid).ws()
    nonce = put_marker(devsy, wid)
    devsy.sh(wid, f"echo kept > {first.workspace_folder}/written-inside.txt")
    if stopped:
        assert devsy.stop(wid).ws().status == "stopped"
        assert not only_instance(backend, wid).running, "the backend still reports the instance running"
    with provider_process(case.provider, case.deadline) as provider:
        assert provider.recreate_mode(opt_in=True) == "on-run", "the provider does not offer ON_RUN to devsy"
        assert provider.recreate_mode(opt_in=False) == "delete", "ON_RUN offered to a host that did not opt in"

    plain = devsy.up(source, wid).ws()  # no permission: the existing instance is reused (and started if stopped)
    assert plain.reused and _same_instance(plain, first), f"a plain up replaced the workspace: {plain.instance}"
    assert_running(plain)
    assert read_marker(devsy, wid) == nonce, "a plain up lost instance-local data"
    if stopped:  # the target of the replacement must be a stopped workspace again
        assert devsy.stop(wid).ws().status == "stopped"

    replaced = devsy.up(source, wid, recreate=True).ws()
    assert_running(replaced)
    assert not replaced.reused and not _same_instance(replaced, first), "up --recreate kept the old instance"
    assert only_instance(backend, wid).id == replaced.instance.id, "the old instance is still in the backend"
    assert read_marker(devsy, wid) is None, "instance-local data survived the replacement"
    assert devsy.sh(wid, f"cat {replaced.workspace_folder}/written-inside.txt").strip() == "kept"
    assert replaced.uid == first.uid, "the replacement changed the workspace identity"

    again = devsy.up(source, wid).ws()  # the permission was for that one request only
    assert again.reused and _same_instance(again, replaced), "permission carried over to a later plain up"


@case("recreate-on-run/running-target")
def test_running_target(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    _replaced_only_with_permission(case, devsy, backend, stopped=False)


@case("recreate-on-run/stopped-target")
def test_stopped_target(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    _replaced_only_with_permission(case, devsy, backend, stopped=True)


@case("recreate-on-run/unauthorized-duplicate")
def test_unauthorized_duplicate(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector
) -> None:
    source = local_source(case)
    wid = case.workspace_id()
    devsy.up(source, wid).ws()
    nonce = put_marker(devsy, wid)
    for state in ("running", "stopped"):
        if state == "stopped":
            devsy.stop(wid).ws()
        before = snapshot(devsy, backend, wid)
        with provider_process(case.provider, case.deadline) as process:
            try:
                process.run_image(wid, GUEST_IMAGE)  # the request devsy never sends: no allow_recreate
            except ProviderRefused as refused:
                assert refused.code == "ALREADY_EXISTS", f"RunImage without permission on a {state} workspace: " \
                                                         f"{refused}"
            else:
                raise AssertionError(f"RunImage without permission on a {state} workspace succeeded")
        assert snapshot(devsy, backend, wid) == before, f"the refused RunImage changed the {state} workspace"
    assert devsy.up(source, wid).ws().reused
    assert read_marker(devsy, wid) == nonce, "the refused RunImage lost instance-local data"


@case("recreate-on-run/invalid-authorized")
def test_invalid_authorized(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector
) -> None:
    source = local_source(case)
    wid = case.workspace_id()
    devsy.up(source, wid).ws()
    nonce = put_marker(devsy, wid)
    before, record = snapshot(devsy, backend, wid), record_path(devsy, wid).read_bytes()
    content = tree_digest(source)

    # Through the CLI: a tmpfs over / is valid devcontainer.json for the host, and the provider must refuse the
    # whole request before it touches the instance that the permission would let it replace.
    write_config(source, {"image": GUEST_IMAGE, "remoteUser": "dev", "mounts": ["type=tmpfs,target=/"]})
    error = devsy.up(source, wid, recreate=True).expect_error("invalid-argument")
    assert "/" in error.message, error
    assert snapshot(devsy, backend, wid) == before, "a rejected authorized replacement changed the workspace"
    assert record_path(devsy, wid).read_bytes() == record, "a rejected authorized replacement rewrote the record"
    assert read_marker(devsy, wid) == nonce, "a rejected authorized replacement lost instance-local data"

    # Through the protocol: permission does not bypass validation (a relative mount target).
    with provider_process(case.provider, case.deadline) as process:
        try:
            process.run_image(wid, GUEST_IMAGE, allow_recreate=True, mounts=(MountSpec("tmpfs", "relative"),))
        except ProviderRefused as refused:
            assert refused.code == "INVALID_ARGUMENT", refused
        else:
            raise AssertionError("an invalid RunImage with allow_recreate succeeded")
    assert snapshot(devsy, backend, wid) == before and read_marker(devsy, wid) == nonce

    write_config(source, {"image": GUEST_IMAGE, "remoteUser": "dev"})
    assert devsy.up(source, wid).ws().reused, "the workspace was not reusable after the rejected replacements"
    assert {k for k, v in tree_digest(source).items() if content.get(k) != v} <= {".devcontainer/devcontainer.json"}


@case("recreate-on-run/survives-restart")
def test_survives_restart(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector
) -> None:
    source = local_source(case)
    wid = case.workspace_id()
    first = devsy.up(source, wid).ws()  # provider process 1 (the CLI's), gone when the command ends
    assert first.instance is not None

    with provider_process(case.provider, case.deadline) as second:
        seen = second.find(wid)
        assert seen is not None and (seen.id, seen.running) == (first.instance.id, True), seen
        assert second.recreate_mode(opt_in=True) == "on-run"  # opted in here: must not outlive this process
    with provider_process(case.provider, case.deadline) as third:
        assert third.find(wid) == seen, "a fresh provider process sees another workspace state"
        try:
            third.run_image(wid, GUEST_IMAGE)
        except ProviderRefused as refused:
            assert refused.code == "ALREADY_EXISTS", refused
        else:
            raise AssertionError("a fresh provider process replaced the workspace without permission")

    replaced = devsy.up(source, wid, recreate=True).ws()  # yet another process, with permission
    assert replaced.instance is not None and replaced.instance.id != first.instance.id
    with provider_process(case.provider, case.deadline) as fourth:
        found = fourth.find(wid)
        assert found is not None and (found.id, found.running) == (replaced.instance.id, True), found
    status = devsy.status(wid).ws()
    assert status.instance is not None and status.instance.id == replaced.instance.id
    assert devsy.up(source, wid).ws().reused
