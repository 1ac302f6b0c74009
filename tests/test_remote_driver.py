"""The remote machine provider end to end: the real CLI drives a workspace through a real remote-host container (the
agent delivered over `docker exec -i`, the runtime downloaded there from the fixture server and run next to the
workspace), and refuses wrong bytes or an unreachable machine with typed errors, leaving nothing behind."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import yaml
from helpers.cli import DEVSY, DevsyCli, cli_env
from helpers.engine import containers_of
from helpers.projects import make_project

from devsy.agent.build import BuiltAgent, build_agent
from devsy.agent.delivery import guest_agent_path
from devsy.agent.build import write_zipapp
from devsy.agent.provider_bundle import PROVIDER_LOCK, ProviderSpec, build_provider, bundle_entries
from devsy.agent.wheels import ensure_wheels
from devsy.driver.base import Capabilities, MountType
from devsy.driver.remote.driver import RemoteDriver
from devsy.ssh.mux.processes import stop_masters_under
from fixtures.artifact_server import ArtifactServer
from fixtures.process_observer import ProcessObserver
from fixtures.remote_host import (
    AGENT_HOME,
    RemoteHost,
    docker_client,
    ensure_remote_host_image,
    remove_remote_host,
    start_remote_host,
)

RUNTIME = "DOCKER_PROVIDER"
NOT_A_PROVIDER = b"#!/bin/sh\necho 'this is no provider' >&2\nexit 3\n"
CANCEL_BOUND_S = 10.0
LAUNCH_BOUND_S = 300.0  # a scratch runtime's start on a new machine (downloads, unpacks), as link.LAUNCH_TIMEOUT_S


@dataclass(frozen=True)
class Remote:
    host: RemoteHost
    server: ArtifactServer
    agent: BuiltAgent
    runtime: BuiltAgent
    fake_sha256: str  # the fake runtime as a bundle (route /fake): its profiles answer Info unlike the docker runtime


@pytest.fixture(scope="module")
def remote(tmp_path_factory) -> Iterator[Remote]:
    ensure_remote_host_image()
    agent, runtime = build_agent(), build_provider("docker")
    fake = fake_runtime_bundle(runtime, tmp_path_factory.mktemp("fake") / "devsy-fake-runtime.pyz")
    wrong = bytearray(runtime.path.read_bytes())
    wrong[len(wrong) // 2] ^= 0xFF
    server = ArtifactServer({"/agent": agent.path.read_bytes(), "/runtime": runtime.path.read_bytes(),
                             "/wrong": bytes(wrong), "/not-a-provider": NOT_A_PROVIDER,
                             "/fake": fake}).start()
    client = docker_client()
    name = f"devsy-test-remote-{secrets.token_hex(4)}"
    try:
        yield Remote(start_remote_host(client, name, {"dev.devsy.test": "remote-driver"}), server, agent, runtime,
                     hashlib.sha256(fake).hexdigest())
    finally:
        remove_remote_host(client, name)
        server.stop()


def fake_runtime_bundle(docker: BuiltAgent, path: Path) -> bytes:
    """devsy-fake-runtime bundled as the docker provider is; the same build key: the same unpacked devsy and wheels."""
    spec = ProviderSpec("devsy-fake-runtime", "devsy.runtime.fake.main:main")
    write_zipapp(path, bundle_entries(spec, docker.key, docker.arch, ensure_wheels(docker.arch, PROVIDER_LOCK)))
    return path.read_bytes()


def provider_config(remote: Remote, path: Path, *, route: str = "/runtime", host: str = "", sha256: str = "",
                    ) -> list[str]:
    """Write the provider config; returns the `devsy up` arguments that select it."""
    config = {
        "name": "remote-docker",
        "agent": {"local": False, "source": [{"os": "linux", "arch": "amd64", "url": remote.server.url("/agent"),
                                              "sha256": remote.agent.sha256}]},
        "exec": {"command": ["docker", "exec", "-i", host or remote.host.name]},
        "runtime": RUNTIME,
        "binaries": {RUNTIME: [{"os": "linux", "arch": "amd64", "url": remote.server.url(route),
                                "sha256": sha256 or remote.runtime.sha256}]},
        "options": {"NETWORK_MODE": "host"},
    }
    path.write_text(yaml.safe_dump(config))
    return ["--provider", "remote", "--provider-option", f"PROVIDER_CONFIG={path}"]


@pytest.fixture
def cli(devsy: DevsyCli, tmp_path: Path) -> DevsyCli:
    devsy.env["DEVSY_DOWNLOAD_CACHE"] = str(tmp_path / "host-downloads")
    return devsy


def leftover_processes(remote: Remote, client) -> tuple[list[str], list[str]]:
    """(processes in the remote host besides its init, host processes still talking to it)."""
    lines = [line.split(None, 1) for line in remote.host.check(client, "ps -eo pid=,args=").splitlines()]
    idle = ("sleep infinity", "/sbin/docker-init -- sleep infinity", "ps -eo pid=,args=")
    inside = [" ".join(parts) for parts in lines if parts[1:] and parts[1] not in idle and "ps -eo" not in parts[1]]
    local = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])
             if remote.host.name in " ".join(p.info["cmdline"] or [])]
    return inside, local


def test_every_command_works_through_the_remote_agent(cli, remote, guest_image, ws_id, tmp_path, docker_client):
    client = docker_client
    args = provider_config(remote, tmp_path / "provider.yaml")
    project = make_project(tmp_path / "project", {"image": guest_image, "remoteUser": "dev"})

    up = cli.up(project, "--id", ws_id, *args).json["workspace"]
    assert up["status"] == "running" and up["provider"] == "remote"
    copy = f"{AGENT_HOME}/workspaces/{ws_id}/bin/{RUNTIME}"
    sha, mode, inode = remote.host.file_facts(client, copy)
    assert (sha, mode) == (remote.runtime.sha256, "755")
    assert remote.host.file_facts(client, guest_agent_path(remote.agent.sha256))[:2] == (remote.agent.sha256, "755")
    assert remote.server.counts() == {"/agent": 1, "/runtime": 1}
    assert not (tmp_path / "host-downloads" / remote.runtime.sha256).exists(), "the host fetched the runtime"

    assert cli.run("exec", ws_id, "--", "id", "-un").stdout == b"dev\n"
    data = os.urandom(1 << 20)
    ssh = cli.run("ssh", ws_id, "--command", "cat; echo err >&2; exit 23", input=data)
    assert (ssh.returncode, hashlib.sha256(ssh.stdout).hexdigest(), ssh.stderr) == (
        23, hashlib.sha256(data).hexdigest(), b"err\n")
    assert cli.run("logs", ws_id).returncode == 0
    assert cli.run("stop", ws_id, "--json").json["workspace"]["status"] == "stopped"
    assert cli.run("start", ws_id, "--json").json["workspace"]["status"] == "running"
    # The driver's exec this time (the first went through the SSH master, which stays until stop, as it should):
    # what it starts for one command must end with it.
    assert cli.run("exec", ws_id, "--", "true", extra_env={"DEVSY_SSH_MUX": "0"}).returncode == 0
    assert remote.host.file_facts(client, copy) == (sha, mode, inode)
    assert remote.server.counts() == {"/agent": 1, "/runtime": 1}
    assert leftover_processes(remote, client) == ([], []), "a runtime or transport outlived its command"

    assert cli.run("delete", ws_id, "--json").json["outcome"] == "success"
    assert containers_of(client, ws_id) == []
    assert remote.host.sh(client, f"test -e {AGENT_HOME}/workspaces/{ws_id}")[0] == 1
    assert leftover_processes(remote, client) == ([], [])


def test_wrong_bytes_are_refused_with_both_digests_and_nothing_installed(cli, remote, guest_image, ws_id, tmp_path,
                                                                          docker_client):
    args = provider_config(remote, tmp_path / "provider.yaml", route="/wrong")
    project = make_project(tmp_path / "project", {"image": guest_image, "remoteUser": "dev"})
    remote.host.check(docker_client, f"rm -rf {AGENT_HOME}/downloads")  # else the verified file is reused as is
    before = remote.server.count("/wrong")

    error = cli.up(project, "--id", ws_id, *args, ok=False).json["error"]

    actual = hashlib.sha256(remote.server._artifacts["/wrong"]).hexdigest()
    assert error["type"] == "runtime-checksum", error
    assert RUNTIME in error["message"] and remote.runtime.sha256 in error["message"] and actual in error["message"]
    assert remote.server.count("/wrong") == before + 1
    leftovers = remote.host.check(docker_client, f"ls -A {AGENT_HOME}/downloads; ls -A {AGENT_HOME}/workspaces "
                                                 f"2>/dev/null | grep -x {ws_id} || true")
    assert remote.runtime.sha256 not in leftovers and ".part" not in leftovers and ws_id not in leftovers
    assert containers_of(docker_client, ws_id) == []
    assert cli.run("status", ws_id, "--json").json["error"]["type"] == "workspace-not-found"


def test_an_unreachable_remote_machine_is_a_typed_error(cli, remote, guest_image, ws_id, tmp_path):
    args = provider_config(remote, tmp_path / "provider.yaml", host=f"devsy-test-absent-{secrets.token_hex(4)}")
    project = make_project(tmp_path / "project", {"image": guest_image, "remoteUser": "dev"})
    error = cli.up(project, "--id", ws_id, *args, ok=False).json["error"]
    assert error["type"] == "remote-unreachable" and "No such container" in error["message"], error
    assert cli.run("status", ws_id, "--json").json["error"]["type"] == "workspace-not-found"


def test_a_cancelled_command_dies_through_the_remote_chain(cli, remote, guest_image, ws_id, tmp_path, docker_client):
    """SIGINT to `devsy ssh` cancels the gRPC Exec relayed through the remote agent; the runtime kills the tree."""
    args = provider_config(remote, tmp_path / "provider.yaml")
    cli.up(make_project(tmp_path / "project", {"image": guest_image, "remoteUser": "dev"}), "--id", ws_id, *args)
    (container,) = containers_of(docker_client, ws_id)
    observer = ProcessObserver.via_docker(container.id)
    nonce = f"nonce-{secrets.token_hex(8)}"
    command = f': {nonce}; python3 -c "import time; time.sleep(4242)" {nonce} & echo "ready $$ $!"; wait'
    proc = subprocess.Popen([*DEVSY, "ssh", ws_id, "--command", command], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(cli))
    try:
        assert proc.stdout is not None
        match = re.fullmatch(rb"ready (\d+) (\d+)\n", proc.stdout.readline())
        assert match, proc.stderr.read() if proc.poll() is not None else b"no ready line"
        tree = [observer.identify(int(match[1]), nonce), observer.identify(int(match[2]), nonce)]
        signalled = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=CANCEL_BOUND_S) == 128 + signal.SIGINT
        assert observer.wait_dead(tree, timeout=CANCEL_BOUND_S - (time.monotonic() - signalled)) == []
    finally:
        proc.kill()
        proc.communicate()
    assert cli.run("ssh", ws_id, "--command", "echo next").stdout == b"next\n"
    # The workspace's SSH master keeps one exec (and so one remote runtime) open for later sessions; that is the only
    # thing allowed to remain, and it goes with the master.
    assert stop_masters_under(cli.home) != []
    assert leftover_processes(remote, docker_client) == ([], [])


def test_a_runtime_that_does_not_start_is_reported_with_its_stderr(cli, remote, guest_image, ws_id, tmp_path):
    args = provider_config(remote, tmp_path / "provider.yaml", route="/not-a-provider",
                           sha256=hashlib.sha256(NOT_A_PROVIDER).hexdigest())
    project = make_project(tmp_path / "project", {"image": guest_image, "remoteUser": "dev"})
    error = cli.up(project, "--id", ws_id, *args, ok=False).json["error"]
    assert error["type"] == "provider-exited", error
    assert "exited with status 3 before its handshake" in error["message"]
    assert "this is no provider" in error["message"], "the runtime's stderr is not in the error"
    assert cli.run("status", ws_id, "--json").json["error"]["type"] == "workspace-not-found"


def fake_provider_config(remote: Remote, tmp_path: Path, *, refuse_remove: bool = False) -> tuple[str, Path]:
    """A config whose runtime is the fake's `legacy` profile, reached through an exec command that logs each remote
    argv to a host file (an observation independent of the driver) and, with `refuse_remove`, fails folder removal."""
    path, log = tmp_path / "provider.yaml", tmp_path / "exec.log"
    provider_config(remote, path)
    config = yaml.safe_load(path.read_text())
    refuse = 'case "$*" in *workspace-remove*) echo "removal refused by the test" >&2; exit 5;; esac; ' \
        if refuse_remove else ""
    config["exec"]["command"] = ["sh", "-c", f'printf "%s\\n" "$*" >> {log}; {refuse}exec docker exec -i '
                                             f'{remote.host.name} "$@"', "exec-command"]
    config["binaries"] = {RUNTIME: [{"os": "linux", "arch": "amd64", "url": remote.server.url("/fake"),
                                     "sha256": remote.fake_sha256}]}
    config["options"] = {"DEVSY_FAKE_PROFILE": "legacy", "DEVSY_FAKE_STATE_DIR": f"/tmp/{tmp_path.name}-fake"}
    path.write_text(yaml.safe_dump(config))
    return str(path), log


def serves(log: Path) -> int:
    return sum("runtime-serve" in line for line in log.read_text().splitlines()) if log.exists() else 0


def scratch_folders(remote: Remote, client) -> list[str]:
    folders = remote.host.check(client, f"ls -A {AGENT_HOME}/workspaces 2>/dev/null || true").split()
    return sorted(name for name in folders if name.startswith("devsy-capabilities-"))


# The fake runtime's legacy profile (API 1.1): every mount type and logs, but no ReusePreflight, unlike the default.
LEGACY = Capabilities(mount_types=(MountType.BIND, MountType.VOLUME, MountType.TMPFS), logs=True,
                      reuse_preflight=False)


def test_capabilities_answer_before_any_workspace_call(remote, tmp_path, docker_client, monkeypatch):
    """A fresh driver asks the runtime itself, once for two callers; stale scratch folders go, fresh ones stay."""
    monkeypatch.setenv("DEVSY_DOWNLOAD_CACHE", str(tmp_path / "host-downloads"))
    assert LEGACY != Capabilities()
    config, log = fake_provider_config(remote, tmp_path)
    stale, fresh = f"devsy-capabilities-{int(time.time()) - 7200}-dead", f"devsy-capabilities-{int(time.time())}-live"
    remote.host.check(docker_client, f"mkdir -p {AGENT_HOME}/workspaces/{stale}/bin {AGENT_HOME}/workspaces/{fresh}")
    driver = RemoteDriver.from_options({"PROVIDER_CONFIG": config})
    barrier, answers = threading.Barrier(2), []

    def ask() -> None:
        barrier.wait(timeout=60)
        answers.append(driver.capabilities())

    threads = [threading.Thread(target=ask) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=LAUNCH_BOUND_S)
        assert not any(thread.is_alive() for thread in threads), f"capabilities() took over {LAUNCH_BOUND_S}s"
    finally:
        driver.close()
        remote.host.check(docker_client, f"rm -rf {AGENT_HOME}/workspaces/{fresh} /tmp/{tmp_path.name}-fake")
    assert answers == [LEGACY, LEGACY]
    assert serves(log) == 1, "not exactly one scratch runtime answered both callers"
    assert scratch_folders(remote, docker_client) == [], "a scratch folder is left (or the stale one was not swept)"
    assert leftover_processes(remote, docker_client) == ([], [])


def test_a_failed_scratch_removal_is_a_warning_and_the_answer_stands(remote, tmp_path, docker_client, monkeypatch,
                                                                     caplog):
    monkeypatch.setenv("DEVSY_DOWNLOAD_CACHE", str(tmp_path / "host-downloads"))
    config, log = fake_provider_config(remote, tmp_path, refuse_remove=True)
    driver = RemoteDriver.from_options({"PROVIDER_CONFIG": config})
    try:
        with caplog.at_level(logging.WARNING, logger="devsy.driver.remote.driver"):
            assert driver.capabilities() == LEGACY
        assert driver.capabilities() == LEGACY and serves(log) == 1, "the answer was not kept"
    finally:
        driver.close()
        left = scratch_folders(remote, docker_client)
        remote.host.check(docker_client, "rm -rf /tmp/" + " ".join([f"{tmp_path.name}-fake"] + [
            f"{AGENT_HOME}/workspaces/{name}" for name in left]))
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(left) == 1 and left[0] in warning and "removal refused by the test" in warning, (left, warning)
