"""dependsOn on a Feature devcontainer.json does not list (containers.dev "Features", dependsOn): `devsy up` (the
real CLI, the real Docker engine) fetches it from an owned loopback registry and installs it, with the options the
dependsOn entry gives, before the Feature that depends on it; its lockfile pin applies and it gets a lockfile entry
as the reference CLI writes it; a cycle and an unreachable dependency fail the up naming them, leaving nothing."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy.agent.wheels import cache_root
from devsy.devcontainer.features.model import parse_user_features
from devsy.devcontainer.features.resolve import resolve_features
from devsy.errors import ConfigError
from fixtures.oci_registry import OciRegistry, feature_tarball, free_loopback_port
from helpers.features import guest_output as _guest, labelled_images as _labelled_images
from helpers.cli import HOST_NET, DevsyCli
from helpers.engine import containers_of
from helpers.projects import make_project
from test_features_fetch import _TarballServer  # its loopback tarball server: one, not a second

pytestmark = pytest.mark.docker

# Each install.sh appends one line to this file: the order of its lines is the order the Features were installed.
ORDER_FILE = "/opt/devsy-feature-order"


@pytest.fixture
def registry() -> Iterator[OciRegistry]:
    with OciRegistry() as started:
        yield started


@pytest.fixture
def pushed(registry: OciRegistry) -> Iterator[list[str]]:
    """The digests a test pushes: their cached folders are removed after it (cache_root is shared by the runs)."""
    digests: list[str] = []
    yield digests
    for digest in digests:
        shutil.rmtree(cache_root() / "features" / "oci" / digest.replace(":", "-"), ignore_errors=True)


def _install(line: str) -> str:
    return f'#!/bin/sh\nset -eu\nmkdir -p /opt\necho "{line}" >> {ORDER_FILE}\n'


def _local_feature(project: Path, name: str, install: str, **meta: object) -> str:
    folder = project / ".devcontainer" / name
    folder.mkdir(parents=True)
    (folder / "devcontainer-feature.json").write_text(json.dumps({"id": name, "version": "1.0.0", **meta}))
    (folder / "install.sh").write_text(install)
    return f"./{name}"


def _push(registry: OciRegistry, pushed: list[str], repo_tag: str, install: str, **meta: object) -> str:
    name = repo_tag.split("/")[-1].split(":")[0]
    digest = registry.push_feature(repo_tag, {
        "devcontainer-feature.json": json.dumps({"id": name, "version": "1.2.0", **meta}), "install.sh": install})
    pushed.append(digest)
    return digest


def test_a_dependency_the_config_does_not_list_is_fetched_and_installed_first_with_its_options(
        devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path, registry: OciRegistry, pushed: list[str],
        docker_client) -> None:
    nonce = secrets.token_hex(4)  # unique content: a Feature cached by an earlier run cannot stand in for this one
    options = {"color": {"type": "string", "default": "red"}}
    first = _push(registry, pushed, "features/base:1", _install(f"base $COLOR first-{nonce}"), options=options)
    base_id = registry.ref("features/base:1")
    project = tmp_path / "p"
    app = _local_feature(project, "app", _install(f"app {nonce}"), dependsOn={base_id: {"color": "blue"}})
    make_project(project, {"image": guest_image, "features": {app: {}}})
    lockfile = project / ".devcontainer" / "devcontainer-lock.json"
    lockfile.write_text('{"features": {}}\n')  # the project opted in: devsy keeps an existing lockfile current

    up = devsy.up(project, "--id", ws_id, *HOST_NET)
    err = up.stderr.decode()
    assert f"installing Feature {base_id}" in err and f"installing Feature {app}" in err, err
    assert err.index(f"installing Feature {base_id}") < err.index(f"installing Feature {app}"), err
    assert _guest(devsy, ws_id, f"cat {ORDER_FILE}") == f"base blue first-{nonce}\napp {nonce}\n"
    # The dependency's entry as the reference writes it: keyed by the id its dependsOn entry writes; the local
    # Feature has none, as in the reference.
    assert lockfile.read_text() == json.dumps({"features": {base_id: {
        "version": "1.2.0", "resolved": f"{registry.host}/features/base@{first}", "integrity": first}}},
        indent=2) + "\n"

    # The tag moves; the lockfile still pins the first content: a rebuild uses the cached copy and asks nothing.
    _push(registry, pushed, "features/base:1", _install(f"base $COLOR second-{nonce}"), options=options)
    registry.mark()
    devsy.up(project, "--id", ws_id, "--recreate", *HOST_NET)
    assert registry.requests() == []
    assert _guest(devsy, ws_id, f"cat {ORDER_FILE}") == f"base blue first-{nonce}\napp {nonce}\n"


def test_a_dependency_the_config_lists_with_the_same_options_is_installed_once(
        tmp_path: Path, registry: OciRegistry, pushed: list[str]) -> None:
    """Resolution only (no engine needed): the same resource with the same options is the same Feature; other
    options are refused, naming both, since devsy installs each Feature once."""
    options = {"color": {"type": "string", "default": "red"}}
    _push(registry, pushed, "features/shared:1", _install("shared"), options=options)
    shared = registry.ref("features/shared:1")
    config_dir = tmp_path / ".devcontainer"
    app = _local_feature(tmp_path, "app", _install("app"), dependsOn={shared: {"color": "red"}})
    user = parse_user_features({app: {}, shared: {}}, config_dir, "devcontainer.json")
    assert [f.source.id for f in resolve_features(user, [], config_dir)] == [shared, app]

    user = parse_user_features({app: {}, shared: {"color": "green"}}, config_dir, "devcontainer.json")
    with pytest.raises(ConfigError, match=rf'"{app}" depends on "{shared}" with the options .*red.* installed '
                                          r"with .*green"):
        resolve_features(user, [], config_dir)


def test_dependencies_are_fetched_recursively_from_tarballs_and_registries(
        tmp_path: Path, registry: OciRegistry, pushed: list[str]) -> None:
    """Resolution only (no engine needed): listed OCI Feature -> tarball dependency (with an option) -> OCI
    dependency of that one; each fetched once, installed dependencies first, with the options their entry gives."""
    nonce = secrets.token_hex(4)
    _push(registry, pushed, "features/leaf:1", _install(f"leaf {nonce}"))
    leaf = registry.ref("features/leaf:1")
    tarball = feature_tarball({"devcontainer-feature.json": json.dumps({
        "id": "middle", "version": "0.3.0", "dependsOn": {leaf: {}},
        "options": {"size": {"type": "string", "default": "s"}}}), "install.sh": _install(f"middle {nonce}")})
    middle_digest = "sha256:" + hashlib.sha256(tarball).hexdigest()
    try:
        with _TarballServer({"/devcontainer-feature-middle.tgz": tarball}) as server:
            middle = server.url("/devcontainer-feature-middle.tgz")
            _push(registry, pushed, "features/top:1", _install("top"), dependsOn={middle: {"size": "xl"}})
            top = registry.ref("features/top:1")
            config_dir = tmp_path / ".devcontainer"
            user = parse_user_features({top: {}}, config_dir, "devcontainer.json")
            resolved = resolve_features(user, [], config_dir)
            assert [(f.source.id, f.options) for f in resolved] == [(leaf, {}), (middle, {"size": "xl"}), (top, {})]
            assert resolved[1].digest == middle_digest and server.paths == ["/devcontainer-feature-middle.tgz"]
    finally:
        shutil.rmtree(cache_root() / "features" / "tarball" / middle_digest.replace(":", "-"), ignore_errors=True)


def test_a_dependency_chain_deeper_than_the_bound_is_a_config_error_naming_it(
        tmp_path: Path, registry: OciRegistry, pushed: list[str]) -> None:
    from devsy.devcontainer.features.resolve import MAX_DEPENDENCY_DEPTH

    ids = [registry.ref(f"features/c{i}:1") for i in range(MAX_DEPENDENCY_DEPTH + 2)]
    for i in range(MAX_DEPENDENCY_DEPTH + 1):  # the last one is never fetched: the bound stops the chain before it
        _push(registry, pushed, f"features/c{i}:1", _install(f"c{i}"), dependsOn={ids[i + 1]: {}})
    config_dir = tmp_path / ".devcontainer"
    user = parse_user_features({ids[0]: {}}, config_dir, "devcontainer.json")
    registry.mark()
    with pytest.raises(ConfigError, match=re.escape(f"longer than {MAX_DEPENDENCY_DEPTH}: " + " -> ".join(ids))):
        resolve_features(user, [], config_dir)
    assert ids[-1].split("/", 1)[1].split(":")[0] not in " ".join(r.path for r in registry.requests())


def test_a_dependency_cycle_is_a_config_error_naming_the_features_and_leaves_nothing(
        devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path, registry: OciRegistry, pushed: list[str],
        docker_client) -> None:
    first_id, second_id = registry.ref("features/first:1"), registry.ref("features/second:1")
    _push(registry, pushed, "features/first:1", _install("first"), dependsOn={second_id: {}})
    _push(registry, pushed, "features/second:1", _install("second"), dependsOn={first_id: {}})
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {first_id: {}}})

    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    err = result.stderr.decode()
    assert result.returncode != 0, result.text
    assert f"cycle: {first_id} -> {second_id} -> {first_id}" in err, err
    assert "Traceback" not in result.text and "installing Feature" not in err
    assert containers_of(docker_client, ws_id) == [] and _labelled_images(docker_client, ws_id) == set()


def test_an_unreachable_dependency_fails_the_up_naming_it_and_leaves_nothing(
        devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path, docker_client) -> None:
    missing = f"127.0.0.1:{free_loopback_port()}/features/missing:1"  # nothing listens: connection refused
    project = tmp_path / "p"
    app = _local_feature(project, "app", _install("app"), dependsOn={missing: {}})
    make_project(project, {"image": guest_image, "features": {app: {}}})

    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    err = result.stderr.decode()
    assert result.returncode != 0, result.text
    assert f"Feature {missing}" in err and "could not be reached" in err, err
    assert "Traceback" not in result.text
    assert containers_of(docker_client, ws_id) == [] and _labelled_images(docker_client, ws_id) == set()
