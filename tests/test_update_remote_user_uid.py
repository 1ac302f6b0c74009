"""updateRemoteUserUID (issue 16, item 5), with devsy run as a non-root host user, observed in the container.

The remote user `dev` (uid 1000 in the guest image) gets the host user's uid/gid through one image layer, so what it
creates in the bind-mounted workspace is the host user's; a reused and a recreated `up` build nothing; `false`
keeps the image's ids; devsy run as root builds no layer; `delete` leaves no layer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy.agent.build import host_arch
from devsy.agent.wheels import PACKAGED_DIR, packaged_wheels
from helpers.cli import DEVSY, HOST_NET, DevsyCli
from helpers.projects import make_project

pytestmark = pytest.mark.docker

HOST_UID, HOST_GID = 42421, 42422  # no such user on the host: devsy needs none, only the ids
_DOCKER_SOCKET = Path("/var/run/docker.sock")


def _as_host_user(argv: list[str]) -> list[str]:
    # The socket's group as a supplementary group, as `usermod -aG docker` gives a developer.
    return ["setpriv", f"--reuid={HOST_UID}", f"--regid={HOST_GID}", f"--groups={_DOCKER_SOCKET.stat().st_gid}",
            *argv]


def _chown_tree(root: Path) -> None:
    for folder, dirs, files in os.walk(root):
        os.chown(folder, HOST_UID, HOST_GID)
        for name in files:
            os.chown(os.path.join(folder, name), HOST_UID, HOST_GID)


@pytest.fixture
def user_dir() -> Iterator[Path]:
    """A folder the non-root user can reach (pytest's tmp folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="devsy-uid-", dir="/tmp"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def user_cli(user_dir: Path, docker_client) -> DevsyCli:
    """The real CLI run as uid 42421 (setpriv), with a DEVSY_HOME, cache and HOME of that user's."""
    probe = subprocess.run(_as_host_user([sys.executable, "-c", "import devsy"]), capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"this host's Python cannot be run by a non-root user (ci/bootstrap.sh makes it so): "
                    f"{probe.stderr.decode()[-300:]}")
    # The user's first up builds the agent from the wheels installed with devsy (world-readable package data), so
    # it downloads nothing (no network here) and needs nothing from root's cache.
    assert packaged_wheels(host_arch()) is not None, \
        f"devsy's package has no agent wheels in {PACKAGED_DIR}: install devsy with pip (`pip install -e .`)"
    base = user_dir / "host-user"
    base.mkdir()
    (base / "cache").mkdir()  # empty: the user's own
    (base / "home").mkdir()
    _chown_tree(base)
    return DevsyCli(home=base / "home" / ".devsy", ssh_config=base / "home" / "ssh_config",
                    env={"HOME": str(base / "home"), "DEVSY_CACHE_DIR": str(base / "cache")})


def _run(cli: DevsyCli, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, **cli.env, "DEVSY_HOME": str(cli.home), "DEVSY_SSH_CONFIG": str(cli.ssh_config)}
    return subprocess.run(_as_host_user([*DEVSY, *args]), env=env, capture_output=True, timeout=timeout)


def _project(root: Path, config: dict) -> Path:
    project = make_project(root, config)
    _chown_tree(root)
    return project


def _workspace_images(docker_client, workspace_id: str) -> set[str]:
    return {image.id for image in docker_client.images.list(all=True,
                                                              filters={"label": f"dev.devsy.workspace={workspace_id}"})}


def _ids(docker_client, workspace_id: str) -> str:
    container = docker_client.containers.list(filters={"label": f"dev.devsy.workspace={workspace_id}"})[0]
    return container.exec_run(["sh", "-c", "id -u dev; id -g dev"]).output.decode()


def _up(cli: DevsyCli, project: Path, workspace_id: str, *args: str) -> subprocess.CompletedProcess:
    done = _run(cli, "up", str(project), "--id", workspace_id, *HOST_NET, *args)
    assert done.returncode == 0, (done.stdout + done.stderr).decode()
    return done


def test_remote_user_gets_the_host_users_ids(user_cli: DevsyCli, ws_id: str, guest_image: str, user_dir: Path,
                                            docker_client) -> None:
    project = _project(user_dir / "p", {"image": guest_image, "remoteUser": "dev"})
    try:
        first = _up(user_cli, project, ws_id)
        assert b"updateRemoteUserUID" in first.stderr
        # The non-root user's agent build read the installed wheels: no fallback download into its cache.
        assert not (Path(user_cli.env["DEVSY_CACHE_DIR"]) / "wheels").exists(), first.stderr.decode()[-2000:]
        assert _ids(docker_client, ws_id) == f"{HOST_UID}\n{HOST_GID}\n"
        made = _run(user_cli, "exec", ws_id, "--", "sh", "-c", "touch by-dev && mkdir dir-by-dev && id -u")
        assert made.returncode == 0, made.stderr
        assert made.stdout == f"{HOST_UID}\n".encode()
        for name in ("by-dev", "dir-by-dev"):
            owner = (project / name).stat()
            assert (owner.st_uid, owner.st_gid) == (HOST_UID, HOST_GID), name
        # dev's home follows its new ids.
        assert _run(user_cli, "exec", ws_id, "--", "sh", "-c", "stat -c %u:%g ~").stdout == \
            f"{HOST_UID}:{HOST_GID}\n".encode()
        layers = _workspace_images(docker_client, ws_id)
        assert layers, "no labelled layer was built"
        reused = _up(user_cli, project, ws_id)
        recreated = _up(user_cli, project, ws_id, "--recreate")
        assert b"updateRemoteUserUID" not in reused.stderr + recreated.stderr  # nothing built again
        assert _workspace_images(docker_client, ws_id) == layers
        assert _ids(docker_client, ws_id) == f"{HOST_UID}\n{HOST_GID}\n"
    finally:
        deleted = _run(user_cli, "delete", ws_id)
    assert deleted.returncode == 0, deleted.stderr
    assert _workspace_images(docker_client, ws_id) == set(), "delete left the uid layer"


def test_false_keeps_the_images_ids(user_cli: DevsyCli, ws_id: str, guest_image: str, user_dir: Path,
                                    docker_client) -> None:
    project = _project(user_dir / "p", {"image": guest_image, "remoteUser": "dev", "updateRemoteUserUID": False})
    try:
        _up(user_cli, project, ws_id)
        assert _ids(docker_client, ws_id) == "1000\n1000\n"
        assert _workspace_images(docker_client, ws_id) == set()
    finally:
        _run(user_cli, "delete", ws_id)


def test_root_on_the_host_builds_no_layer(devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path,
                                          docker_client) -> None:
    devsy.up(make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "dev"}), "--id", ws_id, *HOST_NET)
    assert _ids(docker_client, ws_id) == "1000\n1000\n"
    assert _workspace_images(docker_client, ws_id) == set()
