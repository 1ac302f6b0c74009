"""failure-cleanup: a failing `up` removes only what it created (CATALOGUE.md).

On MicroSandbox the first-up failure after the instance exists is a microVM that never boots, so the case needs no
booted guest (manifest `needs_boot=False`) and runs even where the backend's probe could not boot one.
"""

from __future__ import annotations

import hashlib
import json
import shutil

from fixtures.git_server import UPLOAD_PACK
from harness import case
from harness.backends import BackendInspector
from harness.case_context import CaseContext
from harness.devsy_handle import DevsyHandle
from harness.providers import Provider
from scenarios.git_source import (
    BLOB,
    assert_no_git_left,
    content_matches,
    ctrl_c,
    git_rig,
    interrupted_up,
    partials,
    server_dies,
)
from scenarios.support import (
    GUEST_IMAGE,
    MARKER,
    MISSING_IMAGE,
    assert_fully_gone,
    assert_running,
    local_source,
    managed_content_dir,
    put_marker,
    read_marker,
    record_path,
    snapshot,
    tree_digest,
    write_config,
)


@case("failure-cleanup/first-up-failure")
def test_first_up_failure(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    # A missing image: fails after the record and managed content exist, before any instance.
    image_id = case.workspace_id("image")
    devsy.up(MISSING_IMAGE, image_id).expect_error("image")
    assert_fully_gone(devsy, backend, image_id, managed_content_dir(devsy, image_id))

    if provider.backend == "microsandbox":
        _vm_never_boots(case, devsy, backend)
    else:
        _failing_hook(case, devsy, backend)


# A file that is not libkrunfw: msb creates the sandbox and then cannot build the VM, on every host (KVM or not).
NOT_A_LIBRARY = b"this file is not libkrunfw\n"


def _vm_never_boots(case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    """The sandbox and its volume exist, then the VM does not boot: a typed error and nothing left behind."""
    fake = case.workdir / "libkrunfw-not.so"
    fake.write_bytes(NOT_A_LIBRARY)
    forced_id = case.workspace_id("no-boot")
    source = local_source(case, mounts=[f"type=volume,source={forced_id}-data,target=/data"])
    before = tree_digest(source)
    error = devsy.up(source, forced_id, env={"MSB_LIBKRUNFW_PATH": str(fake)}).expect_error("boot-failed")
    assert "did not boot" in error.message and "msb doctor" in error.hint, error
    assert_fully_gone(devsy, backend, forced_id, managed_content_dir(devsy, forced_id))
    assert tree_digest(source) == before, "the failed up changed the local source folder"
    probe = case.probe
    if probe is None or probe.ok:
        return  # this host boots microVMs: only the forced failure above can happen here
    # Where KVM cannot boot guests (the probe's evidence says so), the natural failure, from an image source.
    natural_id = case.workspace_id("kvm")
    error = devsy.up(GUEST_IMAGE, natural_id).expect_error("boot-failed")
    assert "did not boot" in error.message, error
    assert_fully_gone(devsy, backend, natural_id, managed_content_dir(devsy, natural_id))


def _failing_hook(case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    # A failing postCreateCommand: fails after the instance and its volume exist. waitFor makes `up` wait for it
    # (by default it would go on in the background once `up` has returned, as the spec says).
    hook_id = case.workspace_id("hook")
    source = local_source(
        case, postCreateCommand="exit 7", waitFor="postCreateCommand",
        mounts=[f"type=volume,source={hook_id}-data,target=/data"],
    )
    before = tree_digest(source)
    outcome = devsy.up(source, hook_id)
    assert outcome.outcome == "error" and outcome.exit_code != 0, f"a failing postCreateCommand succeeded: {outcome}"
    assert_fully_gone(devsy, backend, hook_id, managed_content_dir(devsy, hook_id))
    assert tree_digest(source) == before, "the failed up changed the local source folder"


@case("failure-cleanup/existing-preserved")
def test_existing_preserved(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector
) -> None:
    wid = case.workspace_id()
    config = {"image": GUEST_IMAGE, "remoteUser": "dev", "mounts": [f"type=volume,source={wid}-data,target=/data"]}
    source = local_source(case, mounts=config["mounts"])
    ws = devsy.up(source, wid).ws()
    nonce = put_marker(devsy, wid)
    devsy.sh(wid, f"echo kept > {ws.workspace_folder}/written-inside.txt")
    devsy.sh(wid, "echo vol > /data/file", user="root")  # a fresh volume is root-owned
    before = snapshot(devsy, backend, wid)
    record_before = record_path(devsy, wid).read_bytes()
    content_before = tree_digest(source)

    # 1: a malformed devcontainer.json (a config error after the existing workspace is locked and loaded).
    config_file = source / ".devcontainer" / "devcontainer.json"
    config_file.write_text('{"image": "' + GUEST_IMAGE + '", ')
    devsy.up(source, wid).expect_error("config")
    _assert_preserved(devsy, backend, wid, before, record_before, nonce)

    # 2: --recreate towards an image that does not exist (fails while preparing the replacement).
    write_config(source, {**config, "image": MISSING_IMAGE})
    devsy.up(source, wid, recreate=True).expect_error("image")
    _assert_preserved(devsy, backend, wid, before, record_before, nonce)

    write_config(source, config)
    after = tree_digest(source)
    changed = {k for k in set(after) | set(content_before) if after.get(k) != content_before.get(k)}
    assert changed <= {".devcontainer/devcontainer.json"}, f"failed ups changed workspace content: {changed}"
    assert (source / "written-inside.txt").read_text().strip() == "kept"


def _assert_preserved(
    devsy: DevsyHandle, backend: BackendInspector, wid: str, before: object, record: bytes, nonce: str
) -> None:
    assert snapshot(devsy, backend, wid) == before, "a failed up changed the existing workspace"
    assert record_path(devsy, wid).read_bytes() == record, "a failed up rewrote the workspace record"
    assert read_marker(devsy, wid) == nonce, "a failed up lost the instance's local data"
    assert devsy.sh(wid, "cat /data/file").strip() == "vol", "a failed up lost the volume's data"


@case("failure-cleanup/source-retry")
def test_source_retry(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    """An interrupted clone of a `git:` source (the server dies mid-pack; Ctrl-C mid-pack) removes only what that
    attempt made; the retry clones and runs; an existing workspace's content survives failed re-ups, and an
    interrupted re-clone of a removed content folder leaves the workspace as it was."""
    wid = case.workspace_id()
    rig = git_rig(case, wid)
    content = managed_content_dir(devsy, wid)

    # As the Go suite's "cleanup when failing to create a workspace": a repository that does not exist (404 from the
    # same server) fails the first up and `devsy list` is as before for this case's workspaces (the run's home is
    # shared with the cases other workers run meanwhile: only our own ids are ours to compare).
    ours = {wid, case.workspace_id("missing")}
    listed = set(devsy.workspaces().expect_success().listed) & ours
    missing_id = case.workspace_id("missing")
    error = devsy.up(f"git:{rig.server.url('missing.git')}", missing_id).expect_error("workspace")
    assert "clone" in error.message, error
    assert_fully_gone(devsy, backend, missing_id, managed_content_dir(devsy, missing_id))
    assert set(devsy.workspaces().expect_success().listed) & ours == listed, "a failed clone changed `devsy list`"

    for interrupt, kind in ((server_dies(rig), "workspace"), (ctrl_c, "cancelled")):
        error = interrupted_up(devsy, rig, wid, interrupt).expect_error(kind)
        assert "clone" in error.message or kind == "cancelled", error
        assert_no_git_left(rig)
        assert_fully_gone(devsy, backend, wid, content)
        assert not (devsy.home / "workspaces" / wid).exists(), "the interrupted clone left files of its attempt"

    packs = rig.server.count(UPLOAD_PACK)
    ws = devsy.up(rig.source, wid).ws()
    assert_running(ws)
    assert (ws.source_kind, ws.content_dir) == ("git", str(content)), ws
    content_matches(content, rig.files)
    assert partials(devsy, wid) == [], "the retry left a partial clone folder"
    assert rig.server.count(UPLOAD_PACK) > packs, "the retry did not fetch from the server"
    # As the developer: the clone is a normal checkout (the umask's mode), readable by a non-root remoteUser.
    want = hashlib.sha256(rig.files[BLOB]).hexdigest()
    assert devsy.sh(wid, f"sha256sum {ws.workspace_folder}/{BLOB}").split()[0] == want

    # The existing workspace: a re-up never fetches again, and failing re-ups keep its content.
    devsy.sh(wid, f"echo kept > {ws.workspace_folder}/written-inside.txt", user="root")
    devsy.sh(wid, "echo vol > /data/file", user="root")  # a fresh volume is root-owned
    nonce = put_marker(devsy, wid)
    packs = rig.server.count(UPLOAD_PACK)
    assert devsy.up(rig.source, wid).ws().reused
    assert rig.server.count(UPLOAD_PACK) == packs, "a re-up of an existing git workspace fetched again"
    before, record_before, content_before = snapshot(devsy, backend, wid), record_path(devsy, wid).read_bytes(), \
        tree_digest(content)
    config_file = content / ".devcontainer" / "devcontainer.json"
    good_config = config_file.read_bytes()
    missing = {**json.loads(good_config), "image": MISSING_IMAGE}
    for broken, recreate, kind in ((b'{"image": ', False, "config"), (json.dumps(missing).encode(), True, "image")):
        config_file.write_bytes(broken)
        devsy.up(rig.source, wid, recreate=recreate).expect_error(kind)
        _assert_preserved(devsy, backend, wid, before, record_before, nonce)
        config_file.write_bytes(good_config)
        assert tree_digest(content) == content_before, f"a failed re-up ({kind}) changed the clone"

    # The content folder removed by hand, then its re-clone interrupted: the workspace stays as it was.
    shutil.rmtree(content)
    interrupted_up(devsy, rig, wid, server_dies(rig)).expect_error("workspace")
    assert_no_git_left(rig)
    # devsy refuses guest commands while the content folder is missing (a typed error naming --recreate), so the
    # instance's data is read by the backend's own exec.
    assert snapshot(devsy, backend, wid) == before, "an interrupted re-clone changed the existing workspace"
    assert record_path(devsy, wid).read_bytes() == record_before, "an interrupted re-clone rewrote the record"
    kept = backend.exec(wid, ["cat", MARKER, "/data/file"])
    assert (kept.exit_code, kept.stdout.split()) == (0, [nonce, "vol"]), f"the instance's data is gone: {kept}"
    assert not content.exists() and partials(devsy, wid) == [], "the interrupted re-clone left content behind"
    again = devsy.up(rig.source, wid, recreate=True).ws()
    assert_running(again)
    content_matches(content, rig.files)
