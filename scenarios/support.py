"""Helpers shared by the scenario suites. They use only the harness and the devsy CLI, never devsy internals."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from harness import ssh_blocks
from harness.backends import BackendInspector, BackendInstance
from harness.case_context import CaseContext
from harness.devsy_handle import DevsyHandle
from harness.outcome import WorkspaceView
from harness.probes import guest_image

GUEST_IMAGE = guest_image()[0]
# A registry on loopback where nothing listens: the pull fails at once and no traffic leaves the host.
MISSING_IMAGE = "127.0.0.1:9/devsy-harness/missing:none"
# Instance-local data: outside the workspace folder, so only the instance's own filesystem holds it.
MARKER = "/var/tmp/devsy-harness-marker"
DEV_UID = 1000
# The `record_figure` fixture: a named number the report keeps for the result id.
FigureSink = Callable[[str, float], None]


def no_python_images(case: CaseContext) -> tuple[str, ...]:
    """The guest images without python (fixtures.guest_image NO_PYTHON_IMAGES: Debian without python3, busybox),
    each ensured: built once per recipe key, like the default image the backend's probe ensures.

    Where one cannot be built or imported here, the case is not runnable (a skip whose reason is the builder's
    error, as a failed probe's is; the validator counts it against a required provider), never a pass."""
    try:
        from fixtures.guest_image import GUEST_IMAGES, NO_PYTHON_IMAGES, ensure_guest_image
    except ImportError as exc:
        pytest.skip(f"{case.provider.name} not runnable here: the no-python guest images need fixtures.guest_image "
                    f"({exc})")
    for tag in NO_PYTHON_IMAGES:
        try:
            ensure_guest_image(tag=tag, recipe=GUEST_IMAGES[tag], progress=lambda _line: None)
        except Exception as exc:  # evidence, not a crash: the report says why the case could not run here
            pytest.skip(f"{case.provider.name} not runnable here: the guest image {tag} could not be built:\n"
                        f"  $ python -m fixtures.guest_image --image {tag} -> {type(exc).__name__}: {exc}")
    return NO_PYTHON_IMAGES


def ssh_path(devsy: DevsyHandle, workspace_id: str) -> str | None:
    """What serves the workspace's SSH sessions per `devsy status --json`: "agent" (devsy's in-guest agent) or
    "exec" (sessions served from the host, one exec each, where the guest has no python3); None when not said."""
    result = devsy.run("status", workspace_id, "--json")
    assert result.exit_code == 0, f"devsy status {workspace_id} exited {result.exit_code}: {result.stderr[-2000:]!r}"
    workspace = json.loads(result.stdout).get("workspace") or {}
    value = workspace.get("ssh_path")
    return None if value is None else str(value)


def write_config(folder: Path, config: dict[str, Any]) -> Path:
    path = folder / ".devcontainer" / "devcontainer.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def local_source(case: CaseContext, name: str = "src", **config: Any) -> Path:
    """A local folder with an image-only devcontainer.json (remoteUser dev), owned like a developer's checkout."""
    folder = case.workdir / name
    folder.mkdir(parents=True, exist_ok=True)
    write_config(folder, {"image": GUEST_IMAGE, "remoteUser": "dev", **config})
    (folder / "README.md").write_text(f"harness source for {case.result_id}\n")
    if os.geteuid() == 0:
        for path in (folder, *folder.rglob("*")):
            os.chown(path, DEV_UID, DEV_UID)
    return folder


def tree_digest(folder: Path) -> dict[str, str]:
    """Relative path -> mode + content hash, for proving a folder was left untouched."""
    digest = {}
    for path in sorted(folder.rglob("*")):
        stat = path.lstat()
        content = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        digest[str(path.relative_to(folder))] = f"{oct(stat.st_mode)}:{stat.st_uid}:{content}"
    return digest


def put_marker(devsy: DevsyHandle, workspace_id: str) -> str:
    nonce = uuid.uuid4().hex
    devsy.sh(workspace_id, f"echo {nonce} > {MARKER}")
    return nonce


def read_marker(devsy: DevsyHandle, workspace_id: str) -> str | None:
    out = devsy.sh(workspace_id, f"cat {MARKER} 2>/dev/null || echo ABSENT").strip()
    return None if out == "ABSENT" else out


def only_instance(backend: BackendInspector, workspace_id: str) -> BackendInstance:
    """The workspace's single instance as the backend reports it (fails when there are none or several)."""
    found = backend.instances(workspace_id)
    assert len(found) == 1, f"expected exactly one instance labelled {workspace_id}, backend has {found}"
    return found[0]


def record_path(devsy: DevsyHandle, workspace_id: str) -> Path:
    return devsy.home / "workspaces" / workspace_id / "workspace.json"


@dataclass(frozen=True)
class Snapshot:
    """What must not change when devsy refuses or fails an `up` of an existing workspace."""

    uid: str
    instance_id: str
    created_at: str
    status: str
    remote_user: str
    ssh_block: str
    backend_created: str
    volumes: tuple[str, ...]


def snapshot(devsy: DevsyHandle, backend: BackendInspector, workspace_id: str) -> Snapshot:
    ws = devsy.status(workspace_id).ws()
    assert ws.instance is not None, f"{workspace_id} has no instance: {ws}"
    instance = only_instance(backend, workspace_id)
    return Snapshot(
        uid=ws.uid,
        instance_id=ws.instance.id,
        created_at=ws.instance.created_at,
        status=ws.status,
        remote_user=ws.remote_user,
        ssh_block=ssh_blocks.block_text(devsy.ssh_config, workspace_id),
        backend_created=instance.created_at,
        volumes=tuple(sorted(backend.volumes(workspace_id))),
    )


def assert_fully_gone(devsy: DevsyHandle, backend: BackendInspector, workspace_id: str, content_dir: Path) -> None:
    """No record, SSH entry, managed content, instance or volume is left for `workspace_id`."""
    devsy.status(workspace_id).expect_error("workspace-not-found")
    assert not record_path(devsy, workspace_id).exists(), f"record of {workspace_id} left behind"
    assert workspace_id not in ssh_blocks.block_ids(devsy.ssh_config), f"SSH block of {workspace_id} left behind"
    assert not content_dir.exists(), f"managed content {content_dir} left behind"
    assert backend.instances(workspace_id) == [], f"instance left: {backend.instances(workspace_id)}"
    assert backend.volumes(workspace_id) == [], f"volume left: {backend.volumes(workspace_id)}"
    assert workspace_id not in devsy.workspaces().expect_success().listed, f"`devsy list` still shows {workspace_id}"


def managed_content_dir(devsy: DevsyHandle, workspace_id: str) -> Path:
    """Where devsy keeps content it manages for this workspace (git clones, image-source folders)."""
    return devsy.home / "workspaces" / workspace_id / "content"


def assert_running(ws: WorkspaceView) -> None:
    assert ws.status == "running", f"workspace {ws.id} is {ws.status}, expected running"
    assert ws.instance is not None and ws.instance.status == "running", f"instance of {ws.id}: {ws.instance}"


def live_up_args(devsy: DevsyHandle, source: str | Path, workspace_id: str, *, recreate: bool = False) -> list[str]:
    """The arguments of `devsy up` for a LiveCommand (an up the case interrupts), with its cleanup registered first,
    as `DevsyHandle.up` does."""
    if workspace_id not in devsy.created:
        devsy.on_create(workspace_id)
        devsy.created.append(workspace_id)
    return ["up", str(source), "--id", workspace_id, *devsy.provider.up_args(), *(["--recreate"] if recreate else []),
            "--json"]
