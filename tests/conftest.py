"""Fixtures and hooks for tests that drive the real `devsy` CLI against the real Docker engine.

Importable helpers (the CLI runner, projects, engine objects) are in tests/helpers/.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.cli import HOST_NET, DevsyCli
from helpers.engine import build_test_image, engine_unavailable, remove_owned
from helpers.msb import (  # noqa: F401 - fixtures for the msb tests
    boot_probe, busybox_rootfs, msb, msb_home, no_boot, recorder, session_probe)
from helpers.projects import make_project

# A test that uses one of these fixtures (directly or through another fixture) needs the Docker engine.
ENGINE_FIXTURES = frozenset({"docker_client", "guest_image"})


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if ENGINE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.docker)


# CI sets this: there the engine is part of the job (ci/bootstrap.sh starts it), so its absence fails every docker
# test instead of skipping ~190 of them into a green run.
REQUIRE_ENGINE_ENV = "DEVSY_REQUIRE_ENGINE"


@pytest.hookimpl(tryfirst=True)  # before the fixtures are set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Without an engine a docker test is not runnable here: a skip that carries the probe's evidence, not an error.
    if item.get_closest_marker("docker") is not None:
        evidence = engine_unavailable()
        if evidence and os.environ.get(REQUIRE_ENGINE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENGINE_ENV}=1 but the Docker engine does not answer: {evidence}", pytrace=False)
        if evidence:
            pytest.skip(f"not runnable here: {evidence}")


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester, with a harness run inside it getting a run id of its own: under xdist every worker inherits
    PYTEST_XDIST_TESTRUNUID, which the harness takes as the run id (one id per xdist run), so two inner runs on two
    workers shared an id, and the first to finish swept (removed) the other's labelled containers."""
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    return pytester


@pytest.fixture(scope="session")
def guest_image() -> str:
    from fixtures.guest_image import ensure_guest_image

    return ensure_guest_image(progress=lambda *_: None).tag


@pytest.fixture(scope="session")
def docker_client():
    from devsy.driver.docker.engine import connect

    return connect()


@pytest.fixture
def devsy(tmp_path: Path, docker_client) -> Iterator[DevsyCli]:
    cli = DevsyCli(home=tmp_path / "home", ssh_config=tmp_path / "ssh" / "config")
    yield cli
    from devsy.ssh.mux.processes import stop_masters_under

    stop_masters_under(cli.home)  # a test that did not delete its workspace leaves its SSH master behind
    for workspace_id in cli.created:
        remove_owned(docker_client, workspace_id)


@pytest.fixture
def ws_id(devsy: DevsyCli) -> str:
    workspace_id = f"t-{secrets.token_hex(4)}"
    devsy.created.add(workspace_id)
    return workspace_id


@pytest.fixture
def running_workspace(devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path) -> str:
    """A workspace of the guest image, up and running (so the agent has been delivered), with `dev` as its user."""
    config = {"image": guest_image, "remoteUser": "dev"}
    devsy.up(make_project(tmp_path / "running-project", config), "--id", ws_id, *HOST_NET)
    return ws_id


@pytest.fixture(scope="session")
def no_python_image(docker_client, guest_image: str) -> str:
    """The guest image with python3 removed: every other tool the tests use (ps, pgrep, id, env) stays."""
    tag = "devsy-test-nopython:" + hashlib.sha256(guest_image.encode()).hexdigest()[:12]
    dockerfile = f"FROM {guest_image}\nRUN rm -f /usr/bin/python3 /usr/bin/python3.*\n"
    return build_test_image(docker_client, dockerfile, tag)


@pytest.fixture
def exec_workspace(devsy, no_python_image: str, tmp_path) -> str:
    """A running workspace of the image without python3 (so its sessions are exec sessions), with `dev` as its user,
    a containerEnv that remoteEnv unsets, and a remoteEnv value."""
    ws_id = f"np-{secrets.token_hex(4)}"
    devsy.created.add(ws_id)
    config = {"image": no_python_image, "remoteUser": "dev", "containerEnv": {"GONE": "from-container"},
              "remoteEnv": {"GONE": None, "GREETING": "hello from remoteEnv"}}
    up = devsy.up(make_project(tmp_path / "no-python", config), "--id", ws_id, *HOST_NET)
    assert up.json["workspace"]["ssh_path"] == "exec", up.text
    assert "cannot run devsy's agent (the workspace has no python3)" in up.stderr.decode()
    return ws_id


@pytest.fixture(scope="session")
def busybox_image() -> str:
    """devsy-guest-busybox: a static busybox and nothing else (no python3, no `script`, no bash)."""
    from fixtures.guest_image import BUSYBOX_IMAGE_TAG, GUEST_IMAGES, ensure_guest_image

    return ensure_guest_image(tag=BUSYBOX_IMAGE_TAG, recipe=GUEST_IMAGES[BUSYBOX_IMAGE_TAG],
                              progress=lambda *_: None).tag


@pytest.fixture
def busybox_workspace(devsy, busybox_image: str, tmp_path) -> str:
    """A running workspace of the busybox image (exec sessions, terminals through busybox telnetd), user `dev`."""
    ws_id = f"bb-{secrets.token_hex(4)}"
    devsy.created.add(ws_id)
    up = devsy.up(make_project(tmp_path / "busybox", {"image": busybox_image, "remoteUser": "dev"}), "--id", ws_id,
                  *HOST_NET)
    assert up.json["workspace"]["ssh_path"] == "exec", up.text
    assert "with a terminal through /bin/busybox telnetd" in up.stderr.decode(), up.text
    return ws_id


@pytest.fixture(scope="session")
def busybox_without_telnetd_image(docker_client, busybox_image: str) -> str:
    """Stands in for a busybox built without telnetd (Alpine's): a `busybox` first in PATH that lists every applet but
    telnetd. With no util-linux `script` either, its sessions get no terminal."""
    tag = "devsy-test-notelnetd:" + busybox_image.replace(":", "-")
    shim = '#!/bin/sh\\nif [ "$1" = --list ]; then /bin/busybox --list | /bin/busybox grep -vx telnetd; exit; fi\\n' \
           'exec /bin/busybox "$@"\\n'
    dockerfile = (f"FROM {busybox_image}\nRUN mkdir -p /usr/local/bin && printf '{shim}' > /usr/local/bin/busybox && "
                  "chmod 755 /usr/local/bin/busybox\n")
    return build_test_image(docker_client, dockerfile, tag)


@pytest.fixture(scope="session")
def no_shell_image(docker_client, busybox_image: str) -> str:
    """busybox without its applet links: no /bin/sh (its commands run as `/bin/busybox NAME`). Its entrypoint keeps
    it running, so a workspace of it uses `overrideCommand: false`."""
    tag = "devsy-test-noshell:" + busybox_image.replace(":", "-")
    dockerfile = (f"FROM {busybox_image} AS bb\nFROM scratch\nCOPY --from=bb /bin/busybox /bin/busybox\n"
                  'COPY --from=bb /etc/passwd /etc/group /etc/\nENTRYPOINT ["/bin/busybox", "sleep", "86400"]\n')
    return build_test_image(docker_client, dockerfile, tag)
