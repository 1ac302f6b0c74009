"""The guest image builder against the real Docker engine and the real mmdebstrap-built rootfs."""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from fixtures import guest_image
from helpers.engine import run_once
from fixtures.guest_image import (
    CACHE_ENV,
    DEFAULT_RECIPE,
    GUEST_IMAGE_TAG,
    LABEL_GUEST_KEY,
    GuestImage,
    GuestImageError,
    ensure_guest_image,
    guest_key,
    rootfs_tar_path,
)

@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    c = docker.from_env(timeout=120)
    yield c
    c.close()


@pytest.fixture(scope="module")
def guest() -> GuestImage:
    return ensure_guest_image()


@pytest.fixture
def private_tag(client: docker.DockerClient) -> Iterator[str]:
    """A tag only this test uses, so the shared `GUEST_IMAGE_TAG` is never disturbed."""
    tag = f"devsy-guest-test:{uuid.uuid4().hex[:12]}"
    yield tag
    try:
        client.images.remove(tag)
    except docker.errors.ImageNotFound:
        pass


@pytest.mark.docker
def test_second_call_builds_and_imports_nothing(client: docker.DockerClient, guest: GuestImage) -> None:
    image_id = client.images.get(guest.tag).id
    again = ensure_guest_image()
    assert (again.built, again.imported) == (False, False)
    assert again.key == guest.key == guest_key()
    assert client.images.get(GUEST_IMAGE_TAG).id == image_id
    assert client.images.get(GUEST_IMAGE_TAG).labels[LABEL_GUEST_KEY] == guest.key
    assert guest.rootfs_tar == rootfs_tar_path() and guest.rootfs_tar.is_file()


@pytest.mark.docker
def test_guest_runs_python_311(client: docker.DockerClient, guest: GuestImage) -> None:
    code, out = run_once(client, guest.tag, ["python3", "-c", "import sys; print(sys.version_info[:2])"])
    assert (code, out.strip()) == (0, "(3, 11)")


@pytest.mark.docker
def test_guest_has_dev_and_alt_users(client: docker.DockerClient, guest: GuestImage) -> None:
    code, out = run_once(client, guest.tag, ["sh", "-c", "getent passwd dev alt && stat -c '%n %u' /home/*"])
    assert code == 0, out
    lines = out.splitlines()
    users = {f[0]: f for f in (line.split(":") for line in lines if ":" in line)}
    assert users["dev"][2:4] == ["1000", "1000"] and users["dev"][5] == "/home/dev"
    assert users["alt"][2:4] == ["1001", "1001"] and users["alt"][5] == "/home/alt"
    assert users["dev"][6] == "/bin/bash"  # bash is Essential in Debian, so the hook must have picked it
    assert {"/home/dev 1000", "/home/alt 1001"} <= set(lines)


@pytest.mark.parametrize(
    "change",
    [
        {"suite": "trixie"},
        {"variant": "minbase"},
        {"packages": ("python3", "passwd", "procps", "curl")},
        {"hook": DEFAULT_RECIPE.hook + "true\n"},
        {"import_changes": ('CMD ["/bin/bash"]',)},
        {"format_version": DEFAULT_RECIPE.format_version + 1},
    ],
    ids=lambda change: next(iter(change)),
)
def test_key_follows_the_recipe(change: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    changed = dataclasses.replace(DEFAULT_RECIPE, **change)
    assert guest_key(dataclasses.replace(DEFAULT_RECIPE)) == guest_key()
    assert guest_key(changed) != guest_key()
    assert rootfs_tar_path(changed) == tmp_path / guest_key(changed) / "rootfs.tar"
    assert rootfs_tar_path(changed) != rootfs_tar_path()


@pytest.mark.docker
def test_removed_image_is_reimported_from_cached_tar(
    client: docker.DockerClient, guest: GuestImage, private_tag: str
) -> None:
    repository, _, version = private_tag.rpartition(":")
    client.images.get(guest.tag).tag(repository, version)
    current = ensure_guest_image(tag=private_tag)
    assert (current.built, current.imported) == (False, False)

    client.images.remove(private_tag)
    tar_mtime = guest.rootfs_tar.stat().st_mtime_ns
    lines: list[str] = []
    again = ensure_guest_image(tag=private_tag, progress=lines.append)
    assert (again.built, again.imported) == (False, True)
    assert any("reusing cached rootfs" in line for line in lines), lines
    assert client.images.get(private_tag).labels[LABEL_GUEST_KEY] == guest.key
    assert guest.rootfs_tar.stat().st_mtime_ns == tar_mtime
    assert client.images.get(GUEST_IMAGE_TAG).labels[LABEL_GUEST_KEY] == guest.key


def tiny_tar() -> bytes:
    """A one-file rootfs: enough for Docker to import an image that the builder must consider stale."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("etc/hostname")
        info.size = 5
        archive.addfile(info, io.BytesIO(b"stale"))
    return buffer.getvalue()


@pytest.mark.docker
def test_stale_key_label_is_replaced(client: docker.DockerClient, guest: GuestImage, private_tag: str) -> None:
    repository, _, version = private_tag.rpartition(":")
    client.api.import_image_from_data(tiny_tar(), repository=repository, tag=version,
                                      changes=[f"LABEL {LABEL_GUEST_KEY}=stale"])
    stale_id = client.images.get(private_tag).id

    result = ensure_guest_image(tag=private_tag, progress=lambda _line: None)
    assert (result.built, result.imported) == (False, True)
    assert client.images.get(private_tag).labels[LABEL_GUEST_KEY] == guest.key
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(stale_id)  # the replaced image is not left behind as a dangling copy


def stub_mmdebstrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str) -> None:
    """Put a stand-in `mmdebstrap` first on PATH (its last argument is the output tar) and a private cache."""
    stub_dir = tmp_path / "bin"
    stub_dir.mkdir()
    stub = stub_dir / "mmdebstrap"
    stub.write_text(f'#!/bin/sh\nfor out; do :; done\n{body}\n')
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stub_dir}:{os.environ['PATH']}")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))


@pytest.mark.docker
def test_failed_build_leaves_no_tar_and_reports_stderr(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, private_tag: str
) -> None:
    # Half a tar and a failure, as an interrupted or broken build would leave.
    stub_mmdebstrap(monkeypatch, tmp_path,
                    'head -c 4096 /dev/zero > "$out"\necho "E: simulated mirror failure" >&2\nexit 1')
    with pytest.raises(GuestImageError, match="simulated mirror failure") as failure:
        ensure_guest_image(tag=private_tag, progress=lambda _line: None)
    assert "exit code 1" in str(failure.value)
    key_dir = rootfs_tar_path().parent
    assert sorted(p.name for p in key_dir.iterdir() if p.suffix == ".tar") == []


@pytest.mark.docker
def test_hung_build_is_stopped_at_its_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, private_tag: str
) -> None:
    pid_file = tmp_path / "stub.pid"
    stub_mmdebstrap(monkeypatch, tmp_path, f'echo "E: waiting for a mirror" >&2\necho $$ > {pid_file}\nexec sleep 120')
    monkeypatch.setattr(guest_image, "MMDEBSTRAP_TIMEOUT_S", 2.0)
    with pytest.raises(GuestImageError, match="did not finish within 2 s") as failure:
        ensure_guest_image(tag=private_tag, progress=lambda _line: None)
    assert "waiting for a mirror" in str(failure.value)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


@pytest.mark.docker
def test_need_rootfs_rebuilds_only_a_cleared_tar(
    client: docker.DockerClient, guest: GuestImage, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    image_id = client.images.get(guest.tag).id
    stub_mmdebstrap(monkeypatch, tmp_path, 'echo "stand-in rootfs" > "$out"')  # the cache is now empty

    plain = ensure_guest_image(progress=lambda _line: None)
    assert (plain.built, plain.imported, plain.rootfs_tar.exists()) == (False, False, False)

    with_tree = ensure_guest_image(need_rootfs=True, progress=lambda _line: None)
    assert (with_tree.built, with_tree.imported) == (True, False)
    assert with_tree.rootfs_tar.read_text() == "stand-in rootfs\n"
    assert client.images.get(GUEST_IMAGE_TAG).id == image_id


@pytest.mark.docker
def test_cli_check_prints_tag_when_current(guest: GuestImage) -> None:
    proc = subprocess.run([sys.executable, "-m", "fixtures.guest_image", "--check", "--print-tag"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == guest.tag
    assert "current" in proc.stderr
