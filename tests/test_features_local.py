"""Local Dev Container Features through the real CLI on the real Docker engine, observed in the guest.

The Go catalogue's fixture shape (a Dockerfile build plus "features": {"./features/parity": {}}), options with
defaults and the spec's user variables, the cached layer (a recreate with nothing changed builds nothing, a changed
option rebuilds), a failing install.sh (its output tail, redacted; nothing left), and installsAfter ordering.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devsy.driver.microsandbox.naming import loaded_image_tag
from devsy.workspace.paths import workspace_paths
from helpers.features import make_feature as _feature, guest_output as _guest
from helpers.cli import HOST_NET, DevsyCli
from helpers.engine import containers_of
from helpers.msb import images
from helpers.projects import make_project

pytestmark = pytest.mark.docker


def _images(docker_client, ws_id: str) -> dict[str, list[str]]:
    images = docker_client.images.list(all=True, filters={"label": f"dev.devsy.workspace={ws_id}"})
    return {image.id: sorted(image.tags) for image in images}


def _feature_tags(docker_client, ws_id: str) -> set[str]:
    return {tag for tags in _images(docker_client, ws_id).values() for tag in tags
            if tag.startswith(f"devsy-features-{ws_id}:")}


def test_dockerfile_build_with_the_parity_feature(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                   tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}, "containerUser": "root",
                                            "remoteUser": "root", "features": {"./features/parity": {}}})
    (project / ".devcontainer" / "Dockerfile").write_text(
        f"FROM {guest_image}\nRUN mkdir -p /usr/local/share && printf '%s\\n' dockerfile-parity > "
        "/usr/local/share/devsy-image-parity\nENV DEVSY_IMAGE_PARITY=dockerfile-parity\n")
    _feature(project, "features/parity", "mkdir -p /usr/local/share\n"
             "printf '%s\\n' feature-parity >/usr/local/share/devsy-feature-parity\n",
             name="MicroSandbox image parity marker", containerEnv={"DEVSY_FEATURE_PARITY": "feature-parity"})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    script = ("cat /usr/local/share/devsy-image-parity /usr/local/share/devsy-feature-parity; "
              'echo "$DEVSY_IMAGE_PARITY $DEVSY_FEATURE_PARITY"; test -e /tmp/devsy-features/0 || echo installer-gone')
    expected = "dockerfile-parity\nfeature-parity\ndockerfile-parity feature-parity\n"
    seen = _guest(devsy, ws_id, script)
    assert seen == expected + "installer-gone\n", seen  # the Feature's install folder is not left in the image
    over_ssh = devsy.run("ssh", ws_id, "--command", script)
    assert over_ssh.returncode == 0, over_ssh.text
    assert over_ssh.stdout.decode() == expected + "installer-gone\n"


def test_options_user_variables_and_the_cached_layer(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                     tmp_path: Path, docker_client) -> None:
    config: dict = {"image": guest_image, "remoteUser": "dev", "features": {"./opts": {"greeting": "hi there"}}}
    project = make_project(tmp_path / "p", config)
    _feature(project, "opts", 'printf "%s|%s|%s|%s|%s|%s\\n" "$GREETING" "$LOUD" "$_REMOTE_USER" '
             '"$_REMOTE_USER_HOME" "$_CONTAINER_USER" "$_CONTAINER_USER_HOME" > /opt/opts-out\n',
             options={"greeting": {"type": "string", "default": "hello"},
                      "loud": {"type": "boolean", "default": False}})
    first = devsy.up(project, "--id", ws_id, *HOST_NET)
    assert b"installing Feature ./opts" in first.stderr
    assert _guest(devsy, ws_id, "cat /opt/opts-out") == "hi there|false|dev|/home/dev|root|/root\n"
    assert _guest(devsy, ws_id, "id -un") == "dev\n"  # USER and remoteUser as without the Feature
    built = _images(docker_client, ws_id)
    [tag] = _feature_tags(docker_client, ws_id)

    again = devsy.up(project, "--id", ws_id, "--recreate", *HOST_NET)
    assert b"installing Feature" not in again.stderr
    assert _images(docker_client, ws_id) == built  # nothing built, nothing removed
    assert containers_of(docker_client, ws_id)[0].image.tags == [tag]

    config["features"]["./opts"] = {"greeting": "bye", "loud": True}
    make_project(project, config)
    changed = devsy.up(project, "--id", ws_id, "--recreate", *HOST_NET)
    assert b"installing Feature ./opts" in changed.stderr
    assert _guest(devsy, ws_id, "cat /opt/opts-out") == "bye|true|dev|/home/dev|root|/root\n"
    [new_tag] = _feature_tags(docker_client, ws_id) - {tag}  # the old one, still in use then, goes at the next build
    assert containers_of(docker_client, ws_id)[0].image.tags == [new_tag]

    assert devsy.run("delete", ws_id).returncode == 0
    assert _images(docker_client, ws_id) == {}


def test_unknown_option_is_refused_before_anything_is_built(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                             tmp_path: Path, docker_client) -> None:
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {"./opts": {"colour": "red"}}})
    _feature(project, "opts", "true\n", options={"greeting": {"type": "string", "default": "hello"}})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    assert 'Feature "./opts" has no option "colour" (its options: greeting)' in result.stderr.decode()
    assert "Traceback" not in result.text
    assert _images(docker_client, ws_id) == {} and containers_of(docker_client, ws_id) == []


def test_failing_install_leaves_nothing(devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path,
                                        docker_client) -> None:
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {"./good": {}, "./bad": {}}})
    _feature(project, "good", "touch /opt/good\n")
    _feature(project, "bad", 'echo "bad feature step one"\necho "token s3cret-feature-value here"\n'
             'echo "bad feature last words" >&2\nexit 3\n', installsAfter=["good"])
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False,
                      extra_env={"DEVSY_REDACT": "s3cret-feature-value"})
    err = result.stderr.decode()
    assert result.returncode != 0, result.text
    assert "installing Feature ./bad failed" in err
    assert "returned a non-zero code: 3" in err
    assert "bad feature step one" in err and "bad feature last words" in err  # the output's tail
    assert "s3cret-feature-value" not in result.text and "token *** here" in err
    assert "Traceback" not in result.text
    assert containers_of(docker_client, ws_id) == []
    assert _images(docker_client, ws_id) == {}, "a half-built Feature layer was left"
    assert not workspace_paths(devsy.home, ws_id).root.exists(), "the failed first up left its record"


def test_installs_after_orders_installation_and_env_reaches_later_features(devsy: DevsyCli, ws_id: str,
                                                                          guest_image: str, tmp_path: Path) -> None:
    # By id "a-second" would install first; its installsAfter puts it after "z-first" whatever the config's order.
    config = {"image": guest_image, "features": {"./a-second": {}, "./z-first": {}}}
    project = make_project(tmp_path / "p", config)
    _feature(project, "a-second", 'echo "a-second saw FIRST_DIR=$FIRST_DIR" >> /opt/order\n',
             installsAfter=["z-first"])
    _feature(project, "z-first", "echo z-first >> /opt/order\n", containerEnv={"FIRST_DIR": "/opt/first"})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert _guest(devsy, ws_id, "cat /opt/order") == "z-first\na-second saw FIRST_DIR=/opt/first\n"


def test_microsandbox_loads_the_feature_image_built_on_the_host(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                tmp_path: Path, msb_home: Path, no_boot: Path,
                                                                docker_client) -> None:
    # No microVM boots here (no_boot): the up gets as far as the boot, so the image msb was given can be looked at.
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {"./parity": {}}})
    _feature(project, "parity", "touch /opt/parity\n")
    result = devsy.up(project, "--id", ws_id, "--provider", "microsandbox", ok=False, timeout=600,
                      extra_env={"MSB_HOME": str(msb_home), "MSB_LIBKRUNFW_PATH": str(no_boot)})
    assert result.json["error"]["type"] == "boot-failed", result.text
    assert b"installing Feature ./parity" in result.stderr
    # What msb loaded is the Feature image (by its id), not the base image it would otherwise pull or load.
    base = loaded_image_tag(docker_client.images.get(guest_image).id)
    [loaded] = images(msb_home)
    assert loaded.startswith("devsy-image:sha256-") and loaded != base
    assert _images(docker_client, ws_id) == {}  # the failed first up removed the layers it built
