"""Registry images on a backend that pulls them itself (MicroSandbox): the host reads only the image's config from
the registry, msb pulls the image, and the host's Docker engine never holds it. Against an owned loopback registry
(Debian's docker-registry) and the real msb; the VM is made not to boot (no_boot), so the test means the same on a
KVM host and here, and the failed first `up` must still leave nothing behind."""

from __future__ import annotations

import base64
import io
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import docker.errors
import pytest
import requests

from devsy.driver.microsandbox.images import loaded_digest, pull_registry_image
from devsy.driver.microsandbox.msb import MsbClient
from devsy.errors import ImageError
from devsy.registry_image import is_loopback, parse_reference, pinned_reference, read_image_config
from fixtures.oci_registry import OciRegistry, free_loopback_port
from helpers.msb import images, sandboxes

GUEST = "devsy-guest:bookworm"
PASSWORD = "reg-pa55-never-shown"
MSB_AGENT = "oci-client/"  # msb's registry client (its user agent in the registry's access log)

pytestmark = pytest.mark.docker  # the images are pushed from the host's Docker engine


@pytest.fixture
def dev_image(docker_client) -> Iterator[str]:
    """A local image whose config says USER dev (one layer over the guest image), removed afterwards."""
    tag = f"devsy-test-user:{secrets.token_hex(4)}"
    docker_client.images.build(fileobj=io.BytesIO(f"FROM {GUEST}\nUSER dev\n".encode()), tag=tag, rm=True)
    yield tag
    docker_client.images.remove(tag, force=True)


@pytest.fixture
def registry() -> Iterator[OciRegistry]:
    with OciRegistry() as started:
        yield started


@pytest.fixture
def private_registry() -> Iterator[OciRegistry]:
    with OciRegistry(auth=("alice", PASSWORD)) as started:
        yield started


def _docker_config(tmp_path: Path, registry: OciRegistry | None, password: str = PASSWORD) -> Path:
    """A DOCKER_CONFIG folder holding `docker login` credentials for `registry` (none: an empty config)."""
    folder = tmp_path / f"docker-config-{secrets.token_hex(3)}"
    folder.mkdir()
    auths = {} if registry is None else {
        registry.host: {"auth": base64.b64encode(f"alice:{password}".encode()).decode()}}
    (folder / "config.json").write_text(json.dumps({"auths": auths}))
    return folder


def _in_docker(client, ref: str) -> bool:
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


def test_loopback_registries_are_the_only_plain_http_ones() -> None:
    for host in ("127.0.0.1:5000", "localhost:5000", "[::1]:5000", "127.3.4.5", "localhost"):
        assert is_loopback(host), host
    for host in ("docker.io", "ghcr.io", "10.0.0.1:5000", "192.168.1.2", "[fe80::1]:5000", "registry.local:5000"):
        assert not is_loopback(host), host
    assert parse_reference("ubuntu").repository == "library/ubuntu"
    digest = "sha256:" + "a" * 64
    assert parse_reference("127.0.0.1:5000/team/tool@" + digest).reference == digest
    tagged_and_pinned = parse_reference(f"127.0.0.1:5000/team/tool:1@{digest}")  # the digest names the image
    assert (tagged_and_pinned.repository, tagged_and_pinned.reference) == ("team/tool", digest)
    assert pinned_reference("127.0.0.1:5000/team/tool:1", digest) == f"127.0.0.1:5000/team/tool@{digest}"
    assert parse_reference("[::1]:5000/x").api_base == "http://[::1]:5000/v2/x"
    assert is_loopback("LOCALHOST:5000") and is_loopback("[::1]")
    with pytest.raises(ImageError, match="is not valid"):
        read_image_config("127.0.0.1:5000/Team/tool:1")  # Docker refuses upper case too; nothing is sent


def test_the_config_is_read_from_the_registry(registry: OciRegistry, dev_image: str, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(_docker_config(tmp_path, None)))
    ref = registry.push(dev_image, "team/user-image:1")
    registry.mark()
    found = read_image_config(ref)
    assert (found.user, found.registry, found.insecure) == ("dev", registry.host, True)
    assert registry.manifest_reads("team/user-image") == 1
    served = requests.head(f"http://{registry.host}/v2/team/user-image/manifests/1", timeout=30, headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json"}).headers["Docker-Content-Digest"]
    assert found.pinned == f"{registry.host}/team/user-image@{served}"
    with pytest.raises(ImageError, match="was not found in registry") as missing:
        read_image_config(registry.ref("team/user-image:absent"))
    assert "check the image name and tag" in (missing.value.hint or "")


def test_a_private_registry_uses_dockers_credentials_and_never_shows_them(private_registry: OciRegistry,
                                                                          monkeypatch, tmp_path) -> None:
    ref = private_registry.push(GUEST, "team/private:1")
    monkeypatch.setenv("DOCKER_CONFIG", str(_docker_config(tmp_path, None)))
    with pytest.raises(ImageError) as refused:
        read_image_config(ref)
    text = f"{refused.value.message} {refused.value.hint}"
    assert "HTTP 401" in text and f"docker login {private_registry.host}" in text, text
    wrong = "wr0ng-pa55-never-shown"
    monkeypatch.setenv("DOCKER_CONFIG", str(_docker_config(tmp_path, private_registry, wrong)))
    with pytest.raises(ImageError) as rejected:
        read_image_config(ref)  # the credentials were sent, and refused: nothing of them may come back
    said = f"{rejected.value.message} {rejected.value.hint}"
    assert "HTTP 401" in said, said
    for secret in (wrong, base64.b64encode(f"alice:{wrong}".encode()).decode()):
        assert secret not in said
    monkeypatch.setenv("DOCKER_CONFIG", str(_docker_config(tmp_path, private_registry)))
    assert read_image_config(ref).user == ""


def test_a_broken_credential_helper_is_a_clear_error(registry: OciRegistry, monkeypatch, tmp_path) -> None:
    folder = tmp_path / "helper-config"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"credsStore": "devsy-test-no-such-helper"}))
    monkeypatch.setenv("DOCKER_CONFIG", str(folder))
    private = OciRegistry(auth=("alice", PASSWORD))  # only a registry that asks makes devsy read credentials
    with private:
        ref = private.push(GUEST, "team/helper:1")
        with pytest.raises(ImageError, match="reading Docker's credentials for registry") as failed:
            read_image_config(ref)
    assert "credsStore" in (failed.value.hint or "")


def test_the_backend_gets_the_image_whose_user_was_read_even_if_the_tag_moves(registry: OciRegistry, dev_image: str,
                                                                               msb_home: Path, msb: MsbClient,
                                                                               monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(_docker_config(tmp_path, None)))
    ref = registry.push(dev_image, "team/moving:1")
    found = read_image_config(ref)
    registry.push(GUEST, "team/moving:1")  # the tag now names another image (USER root)
    assert read_image_config(ref).user == "" and found.user == "dev"
    pull_registry_image(msb, found.pinned)
    assert loaded_digest(msb, found.pinned) == found.config_digest, "msb holds another image than the one read"
    registry.mark()
    pull_registry_image(msb, found.pinned)  # held by digest: exactly this image, so msb is not asked to fetch it
    assert registry.manifest_reads("team/moving") + registry.manifest_reads("team/moving", method="HEAD") == 0


def test_an_unreachable_registry_fails_at_once_with_a_clear_error() -> None:
    port = free_loopback_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ImageError, match=f"registry 127.0.0.1:{port} .* could not be reached"):
        read_image_config(f"127.0.0.1:{port}/team/none:1")
    assert time.monotonic() - started < 30, "a refused connection must not be retried with sleeps"


@pytest.mark.parametrize("provider", ["microsandbox", "external-microsandbox"])
def test_msb_pulls_the_image_itself_and_docker_never_holds_it(provider: str, devsy, ws_id, msb_home, no_boot,
                                                              registry: OciRegistry, dev_image: str, docker_client,
                                                              tmp_path) -> None:
    ref = registry.push(dev_image, f"team/pulled-{ws_id}:1")
    assert not _in_docker(docker_client, ref)
    registry.mark()
    result = devsy.up(ref, "--id", ws_id, "--provider", provider, ok=False, timeout=600,
                      extra_env={"MSB_HOME": str(msb_home),
                                 "DOCKER_CONFIG": str(_docker_config(tmp_path, None))})
    # The VM cannot boot (no_boot): everything before the boot happened, and the failure removed what `up` made.
    assert result.returncode == 1 and result.json["error"]["type"] == "boot-failed", result.text
    pulls = [r for r in registry.requests() if "/manifests/" in r.path and r.method in ("GET", "HEAD")]
    assert any(r.user_agent.startswith(MSB_AGENT) and r.status == 200 for r in pulls), pulls
    assert not any("docker/" in r.user_agent for r in pulls), "the host's Docker engine pulled the image"
    assert not _in_docker(docker_client, ref), "the image reached the host's Docker engine"
    pinned = [held for held in images(msb_home) if held.startswith(ref.rsplit(":", 1)[0] + "@sha256:")]
    assert pinned, f"msb does not hold the image it pulled, by digest: {images(msb_home)}"
    assert sandboxes(msb_home) == [] and not (devsy.home / "workspaces" / ws_id).exists()


def test_a_private_image_without_credentials_is_refused_before_anything_exists(devsy, ws_id, msb_home,
                                                                              private_registry: OciRegistry,
                                                                              tmp_path) -> None:
    ref = private_registry.push(GUEST, f"team/private-{ws_id}:1")
    result = devsy.up(ref, "--id", ws_id, "--provider", "microsandbox", ok=False, timeout=300,
                      extra_env={"MSB_HOME": str(msb_home), "DOCKER_CONFIG": str(_docker_config(tmp_path, None))})
    assert result.returncode == 1, result.text
    error = result.json["error"]
    assert error["type"] == "image" and "HTTP 401" in error["message"], error
    assert f"docker login {private_registry.host}" in error["hint"]
    assert images(msb_home) == [] and sandboxes(msb_home) == []
    assert not (devsy.home / "workspaces" / ws_id).exists()


def test_msb_pulls_a_private_image_with_dockers_credentials(devsy, ws_id, msb_home, no_boot, docker_client,
                                                            private_registry: OciRegistry, tmp_path) -> None:
    ref = private_registry.push(GUEST, f"team/private-{ws_id}:1")
    private_registry.mark()
    result = devsy.up(ref, "--id", ws_id, "--provider", "microsandbox", ok=False, timeout=600,
                      extra_env={"MSB_HOME": str(msb_home),
                                 "DOCKER_CONFIG": str(_docker_config(tmp_path, private_registry))})
    assert result.json["error"]["type"] == "boot-failed", result.text  # got past the pull
    assert any(held.startswith(ref.rsplit(":", 1)[0] + "@sha256:") for held in images(msb_home))
    assert not _in_docker(docker_client, ref)
    assert any(r.user_agent.startswith(MSB_AGENT) and r.status == 200 for r in private_registry.requests())
    assert PASSWORD not in result.text
    assert base64.b64encode(f"alice:{PASSWORD}".encode()).decode() not in result.text
