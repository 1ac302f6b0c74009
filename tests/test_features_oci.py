"""An OCI-published Feature end to end: `devsy up` (the real CLI, the real Docker engine) of a config naming a
Feature in an owned loopback registry (Debian's docker-registry, its access log counting every request), observed
in the container; what a second up, a rebuild with nothing changed and a changed option ask of the registry."""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy.agent.wheels import cache_root
from fixtures.oci_registry import OciRegistry
from helpers.features import guest_output as _guest, labelled_images as _labelled_images
from helpers.cli import HOST_NET, DevsyCli
from helpers.engine import containers_of
from helpers.projects import make_project

pytestmark = pytest.mark.docker


@pytest.fixture
def registry() -> Iterator[OciRegistry]:
    with OciRegistry() as started:
        yield started


def _reads(registry: OciRegistry) -> tuple[list[str], int]:
    """(the manifest paths read, how many blobs were read) since the last mark."""
    requests = registry.requests()
    return [r.path for r in requests if "/manifests/" in r.path], sum("/blobs/" in r.path for r in requests)


def test_an_oci_feature_with_options_installs_once_and_rebuilds_when_an_option_changes(
        devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path, registry: OciRegistry, docker_client) -> None:
    nonce = secrets.token_hex(4)  # unique content: a Feature cached by an earlier run cannot stand in for this one
    metadata = {"id": "greeter", "version": "1.0.0", "containerEnv": {"GREETER_HOME": "/opt/greeter"},
                "options": {"greeting": {"type": "string", "default": "hello"},
                            "loud": {"type": "boolean", "default": False}}}
    digest = registry.push_feature("features/greeter:1", {
        "devcontainer-feature.json": json.dumps(metadata),
        "install.sh": f'#!/bin/sh\nset -eu\nmkdir -p /opt/greeter\necho "$GREETING|$LOUD|{nonce}" '
                      '> /opt/greeter/said\n'})
    feature_id = registry.ref("features/greeter:1")
    config: dict = {"image": guest_image, "features": {feature_id: {"greeting": "hi there"}}}
    project = make_project(tmp_path / "p", config)
    try:
        registry.mark()
        first = devsy.up(project, "--id", ws_id, *HOST_NET)
        assert f"installing Feature {feature_id}".encode() in first.stderr
        assert _guest(devsy, ws_id, 'cat /opt/greeter/said; echo "$GREETER_HOME"') == \
            f"hi there|false|{nonce}\n/opt/greeter\n"
        assert _reads(registry) == (["/v2/features/greeter/manifests/1"], 1)
        built = _labelled_images(docker_client, ws_id)
        [container] = containers_of(docker_client, ws_id)
        image_tags = container.image.tags

        # A second up with nothing changed reuses the instance and its image: the registry is not asked at all.
        registry.mark()
        second = devsy.up(project, "--id", ws_id, *HOST_NET)
        assert b"installing Feature" not in second.stderr
        assert registry.requests() == []
        assert [c.id for c in containers_of(docker_client, ws_id)] == [container.id]

        # A rebuild (--recreate) with nothing changed re-resolves the tag, as the reference CLI does on every build
        # (one manifest read, no blob: the digest is cached) and builds nothing: the cached image is reused.
        registry.mark()
        again = devsy.up(project, "--id", ws_id, "--recreate", *HOST_NET)
        assert b"installing Feature" not in again.stderr
        assert _reads(registry) == (["/v2/features/greeter/manifests/1"], 0)
        assert _labelled_images(docker_client, ws_id) == built
        assert containers_of(docker_client, ws_id)[0].image.tags == image_tags

        # A changed option rebuilds the Feature's layer from the cached Feature (no blob read).
        config["features"][feature_id] = {"greeting": "bye", "loud": True}
        make_project(project, config)
        registry.mark()
        changed = devsy.up(project, "--id", ws_id, "--recreate", *HOST_NET)
        assert f"installing Feature {feature_id}".encode() in changed.stderr
        assert _guest(devsy, ws_id, "cat /opt/greeter/said") == f"bye|true|{nonce}\n"
        assert _reads(registry)[1] == 0
        assert containers_of(docker_client, ws_id)[0].image.tags != image_tags

        assert devsy.run("delete", ws_id).returncode == 0
        assert _labelled_images(docker_client, ws_id) == set(), "delete removes the Feature layers"
    finally:
        shutil.rmtree(cache_root() / "features" / "oci" / digest.replace(":", "-"), ignore_errors=True)


def test_an_unreachable_feature_registry_fails_the_up_naming_the_feature_and_leaves_nothing(
        devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path, docker_client) -> None:
    from fixtures.oci_registry import free_loopback_port

    feature_id = f"127.0.0.1:{free_loopback_port()}/features/greeter:1"  # nothing listens: connection refused
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {feature_id: {}}})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    err = result.stderr.decode()
    assert result.returncode != 0, result.text
    assert f"Feature {feature_id}" in err and "could not be reached" in err, err
    assert "Traceback" not in result.text
    assert containers_of(docker_client, ws_id) == [] and _labelled_images(docker_client, ws_id) == set()


def test_a_lockfile_pins_the_feature_and_a_rebuild_then_asks_the_registry_nothing(
        devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path, registry: OciRegistry, docker_client) -> None:
    nonce = secrets.token_hex(4)

    def publish(said: str) -> str:
        return registry.push_feature("features/pinned:1", {
            "devcontainer-feature.json": json.dumps({"id": "pinned", "version": "2.1.0"}),
            "install.sh": f"#!/bin/sh\necho {said}-{nonce} > /opt/pinned-said\n"})

    digest = publish("first")
    feature_id = registry.ref("features/pinned:1")
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {feature_id: {}}})
    lockfile = project / ".devcontainer" / "devcontainer-lock.json"
    lockfile.write_text('{"features": {}}\n')  # the project opted in: devsy keeps an existing lockfile current
    moved = ""
    try:
        devsy.up(project, "--id", ws_id, *HOST_NET)
        assert lockfile.read_text() == json.dumps({"features": {feature_id: {
            "version": "2.1.0", "resolved": f"{registry.host}/features/pinned@{digest}", "integrity": digest}}},
            indent=2) + "\n"
        built = _labelled_images(docker_client, ws_id)

        # The tag moves; the lockfile still pins the first content: a rebuild uses the cached copy, asks nothing.
        moved = publish("second")
        registry.mark()
        again = devsy.up(project, "--id", ws_id, "--recreate", *HOST_NET)
        assert b"installing Feature" not in again.stderr
        assert registry.requests() == []
        assert _labelled_images(docker_client, ws_id) == built
        assert _guest(devsy, ws_id, "cat /opt/pinned-said") == f"first-{nonce}\n"
    finally:
        for pinned in (digest, moved):
            if pinned:
                shutil.rmtree(cache_root() / "features" / "oci" / pinned.replace(":", "-"), ignore_errors=True)
