"""failure-cleanup: a failing `up` removes only what it created (CATALOGUE.md).

On MicroSandbox the first-up failure after the instance exists is a microVM that never boots, so the case needs no
booted guest (manifest `needs_boot=False`) and runs even where the backend's probe could not boot one.
"""

from __future__ import annotations

from harness import case
from harness.backends import BackendInspector
from harness.case_context import CaseContext
from harness.devsy_handle import DevsyHandle
from harness.providers import Provider
from scenarios.support import (
    GUEST_IMAGE,
    MISSING_IMAGE,
    assert_fully_gone,
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
    # A failing postCreateCommand: fails after the instance and its volume exist.
    hook_id = case.workspace_id("hook")
    source = local_source(
        case, postCreateCommand="exit 7", mounts=[f"type=volume,source={hook_id}-data,target=/data"]
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
