"""lifecycle: the shared lifecycle and ownership contract (CATALOGUE.md), run against every provider."""

from __future__ import annotations

import os

from harness import case, ssh_blocks
from harness.backends import BackendInspector
from harness.case_context import CaseContext
from harness.devsy_handle import DevsyHandle
from harness.providers import Provider
from scenarios.ownership import (
    backend_sh,
    check_command_users,
    check_guest_entries,
    check_host_entries,
    check_workload_user,
    host_identity,
)
from scenarios.support import (
    DEV_UID,
    GUEST_IMAGE,
    FigureSink,
    assert_fully_gone,
    assert_running,
    local_source,
    managed_content_dir,
    only_instance,
    put_marker,
    read_marker,
    record_path,
    snapshot,
    tree_digest,
    write_config,
)


@case("lifecycle/up-fresh")
def test_up_fresh(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector, record_figure: FigureSink
) -> None:
    source = local_source(case)
    before = tree_digest(source)
    wid = case.workspace_id()

    ws = devsy.up(source, wid).ws()
    record_figure("up_fresh_seconds", devsy.log.records[-1].duration)

    assert_running(ws)
    assert (ws.id, ws.reused, ws.ssh_host, ws.remote_user) == (wid, False, f"{wid}.devsy", "dev")
    assert ws.source_kind == "local" and ws.content_dir is None, ws
    assert record_path(devsy, wid).is_file(), "no workspace record written"
    block = ssh_blocks.block_text(devsy.ssh_config, wid)
    assert f"Host {wid}.devsy" in block, f"SSH entry missing or wrong in {devsy.ssh_config}:\n{block}"
    status = devsy.status(wid).ws()
    assert status.status == "running" and status.uid == ws.uid
    assert wid in devsy.workspaces().expect_success().listed
    instance = only_instance(backend, wid)
    assert instance.running and ws.instance is not None and instance.id == ws.instance.id
    assert devsy.sh(wid, "id -un").strip() == "dev"
    assert devsy.sh(wid, f"cat {ws.workspace_folder}/README.md").startswith("harness source")
    assert tree_digest(source) == before, "up changed the local source folder"


@case("lifecycle/up-reuse")
def test_up_reuse(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector, record_figure: FigureSink
) -> None:
    source = local_source(case)
    wid = case.workspace_id()
    first = devsy.up(source, wid).ws()
    nonce = put_marker(devsy, wid)
    created = only_instance(backend, wid).created_at

    second = devsy.up(source, wid).ws()
    record_figure("up_reuse_seconds", devsy.log.records[-1].duration)

    assert second.reused, f"second up did not reuse: {second}"
    assert second.instance == first.instance, f"instance changed on reuse: {first.instance} -> {second.instance}"
    assert second.uid == first.uid
    assert only_instance(backend, wid).created_at == created, "the backend instance was recreated"
    assert read_marker(devsy, wid) == nonce, "instance-local data lost on reuse"


@case("lifecycle/stop-start")
def test_stop_start(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    source = local_source(case)
    wid = case.workspace_id()
    first = devsy.up(source, wid).ws()
    nonce = put_marker(devsy, wid)
    created = only_instance(backend, wid).created_at

    stopped = devsy.stop(wid).ws()
    assert stopped.status == "stopped", stopped
    assert devsy.status(wid).ws().status == "stopped"
    assert not only_instance(backend, wid).running, "the backend still reports the instance running"

    again = devsy.up(source, wid).ws()
    assert_running(again)
    assert again.reused, f"up after stop did not reuse the stopped instance: {again.instance}"
    assert again.instance is not None and first.instance is not None
    assert (again.instance.id, again.instance.created_at) == (first.instance.id, first.instance.created_at)
    assert only_instance(backend, wid).created_at == created
    assert read_marker(devsy, wid) == nonce, "instance-local data lost across stop/up"

    assert devsy.stop(wid).ws().status == "stopped"
    started = devsy.start(wid).ws()
    assert_running(started)
    assert started.instance is not None and started.instance.created_at == first.instance.created_at
    assert read_marker(devsy, wid) == nonce, "instance-local data lost across stop/start"


@case("lifecycle/recreate")
def test_recreate(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    source = local_source(case)
    wid = case.workspace_id()
    first = devsy.up(source, wid).ws()
    put_marker(devsy, wid)
    devsy.sh(wid, f"echo kept > {first.workspace_folder}/written-inside.txt")

    second = devsy.up(source, wid, recreate=True).ws()

    assert_running(second)
    assert not second.reused, f"--recreate reported a reused instance: {second.instance}"
    assert second.instance is not None and first.instance is not None
    assert second.instance.id != first.instance.id, "--recreate kept the same instance"
    assert second.instance.created_at != first.instance.created_at, "--recreate kept the created time"
    assert only_instance(backend, wid).id == second.instance.id, "the old instance is still in the backend"
    assert read_marker(devsy, wid) is None, "instance-local data survived --recreate"
    assert devsy.sh(wid, f"cat {second.workspace_folder}/written-inside.txt").strip() == "kept"
    assert (source / "written-inside.txt").read_text().strip() == "kept", "workspace content lost on recreate"
    assert second.uid == first.uid, "recreate changed the workspace identity"


def _refused_then_recreated(
    case: CaseContext, devsy: DevsyHandle, backend: BackendInspector, change: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """Up, change devcontainer.json, and check the plain up is refused touching nothing; return the id."""
    source = local_source(case)
    wid = case.workspace_id()
    devsy.up(source, wid).ws()
    nonce = put_marker(devsy, wid)
    before = snapshot(devsy, backend, wid)
    write_config(source, {"image": GUEST_IMAGE, "remoteUser": "dev", **change})

    error = devsy.up(source, wid).expect_error("recreate-required")

    assert "--recreate" in f"{error.message} {error.hint}", f"no recreation guidance in: {error}"
    assert snapshot(devsy, backend, wid) == before, "a refused up changed the workspace"
    assert read_marker(devsy, wid) == nonce, "a refused up lost instance-local data"
    return wid, change


@case("lifecycle/identity-change-refused")
def test_identity_change_refused(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector
) -> None:
    wid, _ = _refused_then_recreated(case, devsy, backend, {"remoteUser": "alt"})
    before = only_instance(backend, wid).created_at

    ws = devsy.up(case.workdir / "src", wid, recreate=True).ws()

    assert_running(ws)
    assert ws.remote_user == "alt" and devsy.sh(wid, "id -un").strip() == "alt"
    assert only_instance(backend, wid).created_at != before, "--recreate did not replace the instance"


@case("lifecycle/mount-policy-change-refused")
def test_mount_policy_change_refused(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector
) -> None:
    moved = {
        "workspaceMount": "source=${localWorkspaceFolder},target=/workspaces/moved,type=bind",
        "workspaceFolder": "/workspaces/moved",
    }
    wid, _ = _refused_then_recreated(case, devsy, backend, moved)
    before = only_instance(backend, wid).created_at

    ws = devsy.up(case.workdir / "src", wid, recreate=True).ws()

    assert_running(ws)
    assert ws.workspace_folder == "/workspaces/moved", ws
    assert devsy.sh(wid, "cat /workspaces/moved/README.md").startswith("harness source")
    assert only_instance(backend, wid).created_at != before, "--recreate did not replace the instance"


@case("lifecycle/delete")
def test_delete(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    local_id, image_id = case.workspace_id("local"), case.workspace_id("image")
    source = local_source(case, mounts=[f"type=volume,source={local_id}-data,target=/data"])
    before = tree_digest(source)
    devsy.up(source, local_id).ws()
    devsy.sh(local_id, "echo data > /data/file", user="root")  # a fresh volume is root-owned
    assert backend.volumes(local_id), "the volume mount created no labelled volume (nothing to prove deleted)"
    image_ws = devsy.up(GUEST_IMAGE, image_id).ws()
    assert image_ws.content_dir, f"an image source should have managed content: {image_ws}"

    for wid in (local_id, image_id):
        outcome = devsy.delete(wid).expect_success()
        assert outcome.workspace_id == wid, outcome

    assert_fully_gone(devsy, backend, local_id, managed_content_dir(devsy, local_id))
    assert_fully_gone(devsy, backend, image_id, managed_content_dir(devsy, image_id))
    assert tree_digest(source) == before, "delete touched the local source folder"


@case("lifecycle/ownership")
def test_ownership(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    """The Go lifecycle-and-ownership contract, on the developer's checkout (owned by uid 1000, mode 0755, as
    `local_source` makes it). What the guest shows of host owners is the backend's row of BACKEND_OWNERSHIP: Docker
    shows host uids (updateRemoteUserUID is not implemented), so the developer `dev` can write the checkout only
    because its uid is the checkout owner's; MicroSandbox maps the folder to the developer."""
    source = local_source(case)
    assert host_identity(source).uid == DEV_UID or os.geteuid() != 0, "the checkout is not the developer's"
    wid = case.workspace_id()
    ws = devsy.up(source, wid).ws()
    folder = ws.workspace_folder

    def recheck(phase: str, developer: str, workload: str) -> None:
        check_workload_user(backend, wid, workload, phase)
        check_command_users(devsy, backend, wid, developer, phase)
        check_host_entries(devsy, wid, source, folder, phase, provider.backend)
        check_guest_entries(devsy, wid, source, folder, phase, provider.backend)

    recheck("fresh", "dev", "root")  # no containerUser: the image's user (root) runs the keep-alive
    created = only_instance(backend, wid).created_at

    assert devsy.stop(wid).ws().status == "stopped"
    assert_running(devsy.up(source, wid).ws())
    assert only_instance(backend, wid).created_at == created, "stop/up replaced the instance"
    recheck("restarted", "dev", "root")

    assert not devsy.up(source, wid, recreate=True).ws().reused
    recreated = only_instance(backend, wid).created_at
    assert recreated != created, "--recreate kept the instance"
    recheck("recreated", "dev", "root")

    # The identity change: root becomes the developer (as in the Go suite) and the workload gets a user of its own.
    nonce = backend_sh(backend, wid, "cat /proc/sys/kernel/random/uuid | tee /tmp/preserved").strip()
    write_config(source, {"image": GUEST_IMAGE, "remoteUser": "root", "containerUser": "alt"})
    refused = devsy.up(source, wid).expect_error("recreate-required")
    assert "--recreate" in f"{refused.message} {refused.hint}", f"no recreation guidance in: {refused}"
    assert only_instance(backend, wid).created_at == recreated, "a refused identity change replaced the instance"
    assert backend_sh(backend, wid, "cat /tmp/preserved").strip() == nonce, "a refused up lost instance data"
    changed = devsy.up(source, wid, recreate=True).ws()
    assert changed.remote_user == "root" and only_instance(backend, wid).created_at != recreated
    recheck("identity-changed", "root", "alt")

    checkout = tree_digest(source)
    devsy.delete(wid).expect_success()
    assert_fully_gone(devsy, backend, wid, managed_content_dir(devsy, wid))
    assert tree_digest(source) == checkout, "delete touched the checkout (host- and guest-created entries included)"
