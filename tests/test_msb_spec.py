"""The `msb run` argument list of a full spec: a golden file (as shown in messages, secrets masked), and proof that
the real msb parses it into the configuration devsy meant (the VM is made unable to boot; the config stays)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devsy.driver.base import HostRequirements, Mount, MountType, RunOptions
from devsy.driver.microsandbox.images import resolve_image
from devsy.driver.microsandbox.msb import MsbClient
from devsy.driver.microsandbox.naming import sandbox_name
from devsy.driver.microsandbox.options import parse_microsandbox_options
from devsy.driver.microsandbox.shown_argv import redact_argv
from devsy.driver.microsandbox.spec import SandboxSpec, build_spec
from devsy.driver.microsandbox.volumes import ensure_volumes
from helpers.msb import msb_json

GOLDEN = Path(__file__).parent / "golden" / "msb_run_full_spec.txt"
SECRET = "tok-5ecr3t-value"
POLICY = "v1;target=/workspaces/proj;mode=rw;owner=dev"
PROVIDER = {
    "MICROSANDBOX_MAX_CPUS": "4", "MICROSANDBOX_MAX_MEMORY": "8192", "MICROSANDBOX_BLOCK_EGRESS": "true",
    "MICROSANDBOX_WORKSPACE_HOST_PERMISSIONS": "mirror", "MICROSANDBOX_WORKSPACE_STAT_VIRTUALIZATION": "relaxed",
    "INACTIVITY_TIMEOUT": "30m",
}


def full_spec(tmp_path: Path, image: str) -> SandboxSpec:
    folder = tmp_path / "proj"
    folder.mkdir(exist_ok=True)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("[user]\n")
    options = RunOptions(
        image=image, user="dev", remote_user="dev", entrypoint=["/bin/sh"],
        cmd=["-c", 'echo "devsy: started"; exec sleep 1000'], env={"TOKEN": SECRET, "LANG": "C.UTF-8"},
        labels={"dev.devsy.workspace-uid": "uid-1", "dev.devsy.remote-user": "dev", "dev.devsy.mount-policy": POLICY},
        workspace_mount=Mount(MountType.BIND, "/workspaces/proj", str(folder)),
        mounts=[Mount(MountType.BIND, "/home/dev/.gitconfig", str(gitconfig), read_only=True),
                Mount(MountType.VOLUME, "/cache", "proj-cache"), Mount(MountType.VOLUME, "/anon"),
                Mount(MountType.TMPFS, "/scratch")],
        host_requirements=HostRequirements(cpus=2, memory_bytes=3 * 1024**3, storage_bytes=16 * 1024**3),
    )
    spec = build_spec("proj-ws", options, parse_microsandbox_options(PROVIDER), rootfs_dir=False)
    return spec.with_image(image, pull="never").with_created_volumes(["proj-cache"])


def test_full_spec_argv_matches_golden(tmp_path: Path) -> None:
    spec = full_spec(tmp_path, "devsy-image:sha256-" + "ab" * 32)
    shown = redact_argv(spec.argv())
    assert shown == GOLDEN.read_text().splitlines()
    assert SECRET not in " ".join(shown) and str(tmp_path) not in " ".join(shown)
    raw = spec.argv()  # the real argv differs only where the golden masks a value
    differences = [(a, b) for a, b in zip(raw, shown, strict=True) if a != b]
    assert differences == [("dev.devsy.created-volumes=proj-cache", "dev.devsy.created-volumes=***"),
                           (f"TOKEN={SECRET}", "TOKEN=***"), ("LANG=C.UTF-8", "LANG=***"),
                           (f"{tmp_path}/proj:/workspaces/proj:rw,stat-virt=relaxed,host-perms=mirror",
                            "***:/workspaces/proj:rw,stat-virt=relaxed,host-perms=mirror"),
                           (f"{tmp_path}/gitconfig:/home/dev/.gitconfig:ro", "***:/home/dev/.gitconfig:ro"),
                           ("proj-cache:/cache", "***:/cache")]


def test_msb_parses_the_full_spec_as_meant(tmp_path: Path, msb_home: Path, msb: MsbClient, no_boot: Path,
                                           guest_image: str) -> None:
    image = resolve_image(msb, guest_image, built_locally=False)
    spec = full_spec(tmp_path, image.ref)
    ensure_volumes(msb, spec.mounts.named_volumes, [])
    result = msb.run(spec.argv(), action="creating", timeout=300, secrets=spec.secrets(), check=False)
    assert result.returncode != 0 and "libkrunfw" in result.stderr  # created, then the VM could not be built
    config = msb_json(msb_home, "inspect", sandbox_name("proj-ws"))["config"]
    assert config["resources"] == {"cpus": 2, "max_cpus": 4, "memory_mib": 3072, "max_memory_mib": 8192}
    assert config["image"]["Oci"]["root_disk"] == {"kind": "managed", "size_mib": 16 * 1024}
    assert config["lifecycle"]["idle_timeout_secs"] == 1800
    assert config["network"]["policy"]["default_egress"] == "deny"
    assert config["runtime"]["user"] == "dev" and config["runtime"]["entrypoint"] == ["/bin/sh"]
    assert config["runtime"]["cmd"] == ["-c", 'echo "devsy: started"; exec sleep 1000']
    assert {e["key"]: e["value"] for e in config["env"]}.items() >= {"TOKEN": SECRET, "LANG": "C.UTF-8"}.items()
    assert config["labels"].items() >= {
        "dev.devsy.managed": "true", "dev.devsy.workspace": "proj-ws", "dev.devsy.created-volumes": "proj-cache",
        "dev.devsy.mount-policy": f"{POLICY};stat-virt=relaxed;host-perms=mirror"}.items()
    mounts = {m["guest"]: m for m in config["mounts"]}
    workspace = mounts["/workspaces/proj"]
    assert (workspace["type"], workspace["host"], workspace["options"]["readonly"]) == (
        "Bind", os.fspath(tmp_path / "proj"), False)
    assert (workspace["stat_virtualization"], workspace["host_permissions"]) == ("relaxed", "mirror")
    assert mounts["/home/dev/.gitconfig"]["options"]["readonly"] is True
    assert (mounts["/cache"]["type"], mounts["/cache"]["name"]) == ("Named", "proj-cache")
    assert mounts["/anon"]["type"] == "Owned" and mounts["/scratch"]["type"] == "Tmpfs"


@pytest.mark.parametrize("workspace_id", ["w" * 122, "w" * 123, "a-" * 200])
def test_long_names_are_cut_stably_with_a_hash(workspace_id: str) -> None:
    name = sandbox_name(workspace_id)
    assert len(name.encode()) <= 128 and name == sandbox_name(workspace_id)
    if len("devsy-" + workspace_id) <= 128:
        assert name == "devsy-" + workspace_id
    else:
        assert name[-13] == "-" and name != sandbox_name(workspace_id + "x")
