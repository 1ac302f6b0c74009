"""The remote-agent suite's rig: the artifacts, an owned fixture HTTP server, an owned remote host and the provider
config that joins them (remote-docker: devsy-provider-docker served on that machine by the devsy agent there).

Each piece is registered for cleanup the moment before it exists, each step under its own budget and independent of
the others: the server, the remote host container, and (registered by `devsy.up`, newer, so run first) the
workspace. A last step, registered first so it runs after all of them, proves that nothing of the case survives:
no container or volume with its labels, no fixture server thread, no process that talks to its remote host or
names its workspaces.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

from fixtures.artifact_server import THREAD_PREFIX, ArtifactServer
from fixtures.remote_host import (
    AGENT_HOME,
    RemoteHost,
    docker_client,
    ensure_remote_host_image,
    remove_remote_host,
    start_remote_host,
)
from harness.backends import LABEL_WORKSPACE
from harness.case_context import CaseContext
from harness.commands import run_bounded
from harness.devsy_handle import DevsyHandle
from harness.outcome import Outcome
from harness.ownership import HARNESS_RUN_LABEL

AGENT_ROUTE = "/agent/devsy-agent.pyz"
RUNTIME_ROUTE = "/runtime/devsy-provider-docker.pyz"
TAMPERED_ROUTE = "/runtime/devsy-provider-docker-tampered.pyz"
RUNTIME = "DOCKER_PROVIDER"
DOWNLOAD_CACHE_ENV = "DEVSY_DOWNLOAD_CACHE"  # this host's pinned-download cache (where the agent bytes land)
LABEL_CASE = "dev.devsy.harness.case"
BUILD_CAP_S = 600.0
SERVER_STOP_S = 10.0


@dataclass(frozen=True)
class Artifact:
    path: Path
    sha256: str


@dataclass(frozen=True)
class CopyFacts:
    sha256: str
    mode: str
    inode: int


@dataclass
class RemoteRig:
    case: CaseContext
    server: ArtifactServer
    host: RemoteHost
    agent: Artifact
    runtime: Artifact
    tampered_sha256: str
    client: object = field(repr=False)

    @property
    def host_downloads(self) -> Path:
        return self.case.workdir / "host-downloads"

    def config(self, runtime_route: str = RUNTIME_ROUTE, name: str = "provider.yaml") -> Path:
        """A provider config pinning the real runtime's sha256, fetched from `runtime_route`."""
        def entry(route: str, sha256: str) -> list[dict[str, str]]:
            return [{"os": "linux", "arch": "amd64", "url": self.server.url(route), "sha256": sha256}]

        path = self.case.workdir / name
        path.write_text(yaml.safe_dump({
            "name": "remote-docker",
            "agent": {"local": False, "source": entry(AGENT_ROUTE, self.agent.sha256)},
            "exec": {"command": self.host.exec_command()},
            "runtime": RUNTIME,
            "binaries": {RUNTIME: entry(runtime_route, self.runtime.sha256)},
        }))
        return path

    def up(self, devsy: DevsyHandle, source: Path, workspace_id: str, config: Path) -> Outcome:
        return devsy.up(source, workspace_id, options=(f"PROVIDER_CONFIG={config}",),
                        env={DOWNLOAD_CACHE_ENV: str(self.host_downloads)})

    def sh(self, script: str) -> str:
        return self.host.check(self.client, script)

    def runtime_copy(self, workspace_id: str) -> str:
        return f"{AGENT_HOME}/workspaces/{workspace_id}/bin/{RUNTIME}"

    def copy_facts(self, workspace_id: str) -> CopyFacts:
        return CopyFacts(*self.host.file_facts(self.client, self.runtime_copy(workspace_id)))

    def listing(self, folder: str) -> list[str]:
        """The entries of a folder on the remote host ([] when it does not exist)."""
        return sorted(self.sh(f"ls -A {folder} 2>/dev/null || true").split())

    def remote_agents(self) -> list[tuple[str, str, int]]:
        """(sha256, mode, inode) of every agent file delivered to the remote host."""
        paths = self.sh("ls /usr/local/lib/devsy/agent-*.pyz 2>/dev/null || true").split()
        return [self.host.file_facts(self.client, path) for path in paths]


def _build(case: CaseContext, module: str, out: Path) -> Artifact:
    """Build with the project's own build command (cached by content key), then hash the result independently."""
    argv = [sys.executable, "-m", module, "--out", str(out)]
    completed = run_bounded(argv, timeout=case.deadline.timeout(f"building {module}", BUILD_CAP_S))
    case.log.add(completed.record(note=f"build {out.name}"))
    assert completed.exit_code == 0 and out.is_file(), f"{module} failed: {completed.stderr[-2000:]!r}"
    return Artifact(out, hashlib.sha256(out.read_bytes()).hexdigest())


def open_rig(case: CaseContext) -> RemoteRig:
    """The rig of one case; everything it creates is owned by the run and removed by the case's cleanup."""
    client = docker_client()
    name = case.workspace_id("remote-host")  # an owned name: the run's prefix, case, provider and a hash
    labels = {HARNESS_RUN_LABEL: case.paths.run_id, LABEL_CASE: name}
    case.cleanup.add("verify nothing of the case survives", lambda: _verify_nothing_left(case, client, name))
    agent = _build(case, "devsy.agent.build", case.workdir / "devsy-agent.pyz")
    runtime = _build(case, "devsy.agent.provider_bundle", case.workdir / "devsy-provider-docker.pyz")
    tampered = bytearray(runtime.path.read_bytes())
    tampered[len(tampered) // 2] ^= 0xFF  # same size, one byte off: only the checksum can tell
    server = ArtifactServer({AGENT_ROUTE: agent.path.read_bytes(), RUNTIME_ROUTE: runtime.path.read_bytes(),
                             TAMPERED_ROUTE: bytes(tampered)})
    case.cleanup.add("stop the fixture HTTP server", lambda: server.stop(SERVER_STOP_S))
    server.start()
    ensure_remote_host_image()
    case.cleanup.add(f"remove remote host {name}", lambda: remove_remote_host(client, name))
    host = start_remote_host(client, name, labels)
    return RemoteRig(case, server, host, agent, runtime, hashlib.sha256(tampered).hexdigest(), client)


def _verify_nothing_left(case: CaseContext, client, host_name: str) -> None:
    """Fail (as a cleanup error) if any container, volume, server thread or process of this case survived."""
    left: list[str] = []
    workspaces = case.created_workspaces()
    for container in client.containers.list(all=True):
        labels = container.labels or {}
        if labels.get(LABEL_CASE) == host_name or labels.get(LABEL_WORKSPACE) in workspaces:
            left.append(f"container {container.name}")
    for volume in client.volumes.list():
        if (volume.attrs.get("Labels") or {}).get(LABEL_WORKSPACE) in workspaces:
            left.append(f"volume {volume.name}")
    left += [f"thread {t.name}" for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]
    for process in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if host_name in command or any(ws in command for ws in workspaces):
            left.append(f"process {process.info['pid']}: {command[:200]}")
    if left:
        raise AssertionError(f"left behind by {case.result_id}: {'; '.join(left)}")
