"""Images against the real msb and Docker engine: `docker save | msb load`, tagged by digest, and a failing save."""

from __future__ import annotations

import contextlib
import io
import secrets
from pathlib import Path

import docker.errors
import psutil
import pytest

from devsy.driver.microsandbox.images import load_docker_image, loaded_digest, resolve_image
from devsy.driver.microsandbox.msb import MsbClient
from devsy.driver.microsandbox.naming import loaded_image_tag
from devsy.errors import ImageError
from fixtures.oci_registry import OciRegistry
from helpers.msb import images


def test_docker_image_is_loaded_once_and_tagged_by_digest(msb_home: Path, msb: MsbClient, guest_image: str,
                                                          docker_client) -> None:
    image_id = docker_client.images.get(guest_image).id
    first = resolve_image(msb, guest_image, built_locally=False)
    assert first.ref == loaded_image_tag(image_id) == f"devsy-image:sha256-{image_id.split(':')[1]}"
    assert first.loaded and first.pull == "never" and first.source == "docker"
    assert loaded_digest(msb, first.ref) == image_id
    # Saved by id: msb holds only the digest tag, not the image's moving host tag.
    assert images(msb_home) == [first.ref]
    again = resolve_image(msb, guest_image, built_locally=True)
    assert again.ref == first.ref and not again.loaded


def test_a_moved_tag_loads_a_new_digest_and_keeps_the_old(msb_home: Path, msb: MsbClient, guest_image: str,
                                                          docker_client) -> None:
    moving = f"devsy-msb-test:moving-{secrets.token_hex(4)}"
    docker_client.images.get(guest_image).tag(moving)
    derived = None
    try:
        before = resolve_image(msb, moving, built_locally=False)
        dockerfile = io.BytesIO(f"FROM {guest_image}\nLABEL dev.devsy.test={moving}\n".encode())
        derived, _ = docker_client.images.build(fileobj=dockerfile, tag=moving, rm=True)
        after = resolve_image(msb, moving, built_locally=True)
        assert after.ref == loaded_image_tag(derived.id) != before.ref
        assert loaded_digest(msb, before.ref) == docker_client.images.get(guest_image).id
        assert sorted(images(msb_home)) == sorted([before.ref, after.ref])
    finally:
        docker_client.images.remove(moving, force=True)  # the derived image had only this tag: it goes too
        if derived is not None:
            with contextlib.suppress(docker.errors.ImageNotFound):
                docker_client.images.remove(derived.id, force=True)


def test_failed_save_stops_and_reaps_the_load(msb_home: Path, msb: MsbClient, docker_client) -> None:
    missing = "sha256:" + "0" * 64
    tag = loaded_image_tag(missing)
    with pytest.raises(ImageError, match="docker save") as caught:
        load_docker_image(msb, docker_client.api, missing, tag)
    assert "msb load was stopped" in caught.value.message
    assert [p for p in psutil.Process().children(recursive=True) if p.name() == "msb"] == []
    assert loaded_digest(msb, tag) is None and images(msb_home) == []


@pytest.mark.docker
def test_missing_locally_built_image_is_an_image_error(msb_home: Path, msb: MsbClient) -> None:
    with pytest.raises(ImageError, match="no longer in the Docker engine"):
        resolve_image(msb, f"devsy-build-gone:{secrets.token_hex(4)}", built_locally=True)


def test_a_rootfs_directory_is_passed_through(msb: MsbClient, busybox_rootfs: Path) -> None:
    rootfs = resolve_image(msb, str(busybox_rootfs), built_locally=False)
    assert (rootfs.ref, rootfs.source, rootfs.pull) == (str(busybox_rootfs), "rootfs", "never")


@pytest.mark.docker  # the image is pushed from the host's engine; msb then pulls it from the loopback registry
def test_a_registry_reference_is_pulled_by_msb_before_the_run(msb_home: Path, msb: MsbClient) -> None:
    with OciRegistry() as registry:
        ref = registry.push("devsy-guest:bookworm", "team/tool:1")
        remote = resolve_image(msb, ref, built_locally=False)
        assert (remote.ref, remote.source, remote.pull) == (ref, "registry", "never")
        assert images(msb_home) == [ref]
        with pytest.raises(ImageError, match=r"`msb pull .*team/tool:absent` failed"):
            resolve_image(msb, registry.ref("team/tool:absent"), built_locally=False)
