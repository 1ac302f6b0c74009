"""Shared fixtures for tests that drive the real `devsy` CLI against the real Docker engine."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.commands import run_bounded, tail

DEVSY = [sys.executable, "-m", "devsy"]
# Every container a test creates gets host networking: these machines' engine runs without a bridge.
HOST_NET = ["--provider-option", "NETWORK_MODE=host"]


@dataclass
class CliResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.stdout)

    @property
    def text(self) -> str:
        return self.stdout.decode() + self.stderr.decode()


@dataclass
class DevsyCli:
    """Runs the real CLI in a subprocess with its own DEVSY_HOME and ssh config file."""

    home: Path
    ssh_config: Path
    env: dict[str, str] = field(default_factory=dict)
    created: set[str] = field(default_factory=set)

    def run(self, *args: str, input: bytes | None = None, timeout: float = 180, extra_env: dict | None = None,
            ) -> CliResult:
        env = {**os.environ, "DEVSY_HOME": str(self.home), "DEVSY_SSH_CONFIG": str(self.ssh_config), **self.env,
               **(extra_env or {})}
        proc = subprocess.run([*DEVSY, *args], input=input if input is not None else b"", capture_output=True,
                              env=env, timeout=timeout)
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    def up(self, source: str | Path, *args: str, ok: bool = True, **kw) -> CliResult:
        result = self.run("up", str(source), *args, "--json", **kw)
        if "--id" in args:
            self.created.add(args[args.index("--id") + 1])
        if ok:
            assert result.returncode == 0, result.text
        return result


# A test that uses one of these fixtures (directly or through another fixture) needs the Docker engine.
ENGINE_FIXTURES = frozenset({"docker_client", "guest_image"})
ENGINE_PROBE = ["docker", "info"]  # what ci/bootstrap.sh asks; the CLI honours DOCKER_HOST like the SDK does
ENGINE_PROBE_TIMEOUT_S = 30.0
_engine_evidence: list[str] = []  # [] = not probed yet; [""] = the engine answers; [text] = why it does not


def engine_unavailable() -> str:
    """"" when the Docker engine answers `docker info`, else the evidence why not (probed once per session)."""
    if not _engine_evidence:
        _engine_evidence.append(_probe_engine())
    return _engine_evidence[0]


def _probe_engine() -> str:
    where = os.environ.get("DOCKER_HOST", "") or "the default socket"
    command = f"`{' '.join(ENGINE_PROBE)}` (DOCKER_HOST={where})"
    try:
        done = run_bounded(ENGINE_PROBE, timeout=ENGINE_PROBE_TIMEOUT_S)
    except OSError as exc:  # no docker CLI on PATH
        return f"{command} could not start: {exc}"
    if done.timed_out:
        return f"{command} did not answer within {ENGINE_PROBE_TIMEOUT_S:.0f} s: {tail(done.stderr, 5) or '(no output)'}"
    if done.exit_code != 0:
        first = "\n".join((done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()[:5])
        return f"{command} exited {done.exit_code} in {done.duration:.1f} s: {first or '(no output)'}"
    return ""


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


@pytest.fixture(scope="session")
def guest_image() -> str:
    from fixtures.guest_image import ensure_guest_image

    return ensure_guest_image(progress=lambda *_: None).tag


@pytest.fixture(scope="session")
def docker_client():
    from devsy.driver.docker.engine import connect

    return connect()


def _remove_owned(client, workspace_id: str) -> None:
    label = f"dev.devsy.workspace={workspace_id}"
    for container in client.containers.list(all=True, filters={"label": label}):
        container.remove(force=True, v=True)
    for volume in client.volumes.list(filters={"label": label}):
        volume.remove(force=True)
    from devsy.devcontainer.image_prepare import remove_built_images

    remove_built_images(workspace_id)  # built from a test's Dockerfile, untagged layers of a failed build too


@pytest.fixture
def devsy(tmp_path: Path, docker_client) -> Iterator[DevsyCli]:
    cli = DevsyCli(home=tmp_path / "home", ssh_config=tmp_path / "ssh" / "config")
    yield cli
    from devsy.ssh.mux_processes import stop_masters_under

    stop_masters_under(cli.home)  # a test that did not delete its workspace leaves its SSH master behind
    for workspace_id in cli.created:
        _remove_owned(docker_client, workspace_id)


@pytest.fixture
def ws_id(devsy: DevsyCli) -> str:
    workspace_id = f"t-{secrets.token_hex(4)}"
    devsy.created.add(workspace_id)
    return workspace_id


def make_project(root: Path, config: dict | str) -> Path:
    """A folder with .devcontainer/devcontainer.json (a dict is dumped as JSON, a str written verbatim)."""
    (root / ".devcontainer").mkdir(parents=True, exist_ok=True)
    text = config if isinstance(config, str) else json.dumps(config)
    (root / ".devcontainer" / "devcontainer.json").write_text(text)
    return root


def containers_of(client, workspace_id: str) -> list:
    return client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={workspace_id}"})


def volumes_of(client, workspace_id: str) -> list:
    return client.volumes.list(filters={"label": f"dev.devsy.workspace={workspace_id}"})


@pytest.fixture
def running_workspace(devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path) -> str:
    """A workspace of the guest image, up and running (so the agent has been delivered), with `dev` as its user."""
    config = {"image": guest_image, "remoteUser": "dev"}
    devsy.up(make_project(tmp_path / "running-project", config), "--id", ws_id, *HOST_NET)
    return ws_id


def cli_env(devsy: DevsyCli, **extra: str) -> dict[str, str]:
    """The environment `devsy.run` uses, for tests that start the CLI with subprocess.Popen themselves."""
    return {**os.environ, "DEVSY_HOME": str(devsy.home), "DEVSY_SSH_CONFIG": str(devsy.ssh_config), **devsy.env,
            **extra}
