"""The refusals the fixes of the Features review (tests/test_features_review.py) added, through the real CLI: each
is a ConfigError naming the Feature, given before anything is built or created."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers.cli import HOST_NET, DevsyCli
from helpers.projects import make_project

pytestmark = pytest.mark.docker


def _feature(folder: Path, install: str = "#!/bin/sh\ntrue\n", **meta: object) -> None:
    folder.mkdir(parents=True)
    (folder / "devcontainer-feature.json").write_text(json.dumps({"id": folder.name, "version": "1.0.0", **meta}))
    (folder / "install.sh").write_text(install)


def _labelled(docker_client, ws_id: str) -> list[str]:
    return [image.id for image in
            docker_client.images.list(all=True, filters={"label": f"dev.devsy.workspace={ws_id}"})]


def _refused(devsy: DevsyCli, project: Path, ws_id: str, docker_client, *expected: str) -> str:
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    err = result.stderr.decode()
    assert result.returncode != 0, result.text[-800:]
    assert "Traceback" not in result.text
    for part in expected:
        assert part in err, err[-800:]
    assert _labelled(docker_client, ws_id) == [], "something was built before the refusal"
    assert docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={ws_id}"}) == []
    return err


def test_a_line_break_in_a_features_container_env_is_refused(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                             tmp_path: Path, docker_client) -> None:
    """No Dockerfile line can hold it (the reference CLI writes it raw and its build breaks)."""
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {"./nl": {}}})
    _feature(project / ".devcontainer" / "nl", containerEnv={"DEVSY_TWO_LINES": "one\nRUN touch /opt/injected"})
    _refused(devsy, project, ws_id, docker_client, 'Feature "./nl"', '"DEVSY_TWO_LINES" holds a line break')


def test_a_root_devcontainer_json_takes_local_features_from_dot_devcontainer_only(
        devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path, docker_client) -> None:
    """A .devcontainer.json at the project's root: the reference CLI's local Features live in .devcontainer/ too."""
    project = tmp_path / "p"
    _feature(project / "beside")
    (project / ".devcontainer.json").write_text(json.dumps({"image": guest_image, "features": {"./beside": {}}}))
    _refused(devsy, project, ws_id, docker_client, 'Feature "./beside"', "not inside the project's .devcontainer")
    _feature(project / ".devcontainer" / "inside", "#!/bin/sh\ntouch /opt/inside-ran\n")
    (project / ".devcontainer.json").write_text(json.dumps({"image": guest_image, "remoteUser": "root",
                                                            "features": {"./.devcontainer/inside": {}}}))
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert devsy.run("exec", ws_id, "--", "test", "-e", "/opt/inside-ran").returncode == 0


@pytest.mark.parametrize("link", ["install.sh", "data"])
def test_a_symlink_leading_outside_dot_devcontainer_is_refused(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                               tmp_path: Path, docker_client, link: str) -> None:
    """A file or folder symlink to a host path outside .devcontainer would copy that path into the image."""
    outside = tmp_path / "host-secret"
    outside.mkdir()
    (outside / "install.sh").write_text("#!/bin/sh\ntrue\n")
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {"./f": {}}})
    folder = project / ".devcontainer" / "f"
    _feature(folder)
    if link == "install.sh":
        (folder / "install.sh").unlink()
        os.symlink(outside / "install.sh", folder / "install.sh")
    else:
        os.symlink(outside, folder / "data")
    _refused(devsy, project, ws_id, docker_client, 'Feature "./f"', f"{link} in ", "is a symlink to",
             "outside the folder it may point into")
