"""Provider start-up: the go-plugin handshake line comes before the heavy imports, and what it promises holds.

The order is observed, not timed: the provider runs with PYTHONPROFILEIMPORTTIME (Python writes a line on stderr as
each import completes) and its stderr joined to its stdout, so the handshake line's place among the import lines
says what was imported before it. Then a host uses the very address the line gave: health first, then Info and
the other RPCs that need the imports made after the line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devsy.runtime.host.testing import docker_command, fake_command, running
from devsy.runtime.v1 import runtime_pb2 as pb
from devsy.runtime.v1 import runtime_pb2_grpc
from devsy.runtime.wire.constants import APP_PROTOCOL_VERSION, COOKIE_KEY, COOKIE_VALUE, ENV_PROTOCOL_VERSIONS, \
    HEALTH_SERVICE
from devsy.runtime.wire.handshake import parse_line

LINE_TIMEOUT_S = 120.0  # generous: the machine may be busy
RPC_TIMEOUT_S = 120.0
# Modules a provider needs for its services but not to listen and print the line.
SERVICE_MODULES = ("devsy.runtime.v1.runtime_pb2", "devsy.runtime.sdk.service", "devsy.driver.base")
DOCKER_MODULES = ("docker", "requests", "urllib3", "devsy.driver.docker.driver")
FAKE_MODULES = ("devsy.runtime.fake.driver", "devsy.runtime.fake.scenarios")


def _imported(line: str) -> str | None:
    """The module an importtime line reports (`import time: self | cumulative | name`), else None."""
    if not line.startswith("import time:"):
        return None
    name = line.rsplit("|", 1)[-1].strip()
    return None if name == "imported package" else name


class _Started:
    """A provider started as a host starts it, with import times on; its output read up to the handshake line."""

    def __init__(self, binary: str, args: list[str], env: dict[str, str], socket_dir: Path) -> None:
        environ = {**os.environ, **env, COOKIE_KEY: COOKIE_VALUE, ENV_PROTOCOL_VERSIONS: str(APP_PROTOCOL_VERSION),
                   "PLUGIN_UNIX_SOCKET_DIR": str(socket_dir), "PYTHONPROFILEIMPORTTIME": "1"}
        self.process = subprocess.Popen([binary, *args], env=environ, stdin=subprocess.DEVNULL,  # noqa: S603
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.before: list[str] = []  # modules imported before the line
        self.line = ""
        killer = threading.Timer(LINE_TIMEOUT_S, self.process.kill)  # bounds the read: EOF once killed
        killer.start()
        try:
            for raw in self.process.stdout:
                if raw.startswith(f"1|{APP_PROTOCOL_VERSION}|"):
                    self.line = raw
                    break
                name = _imported(raw)
                if name is not None:
                    self.before.append(name)
        finally:
            killer.cancel()
        assert self.line, f"no handshake line within {LINE_TIMEOUT_S:g}s; output ended after {self.before[-5:]}"
        # Keep draining (import lines, the provider's stderr) so the provider never blocks on a full pipe.
        self.after: list[str] = []
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _read_rest(self) -> None:
        for raw in self.process.stdout:
            name = _imported(raw)
            if name is not None:
                self.after.append(name)

    def close(self) -> None:
        self.process.kill()
        self.process.wait(RPC_TIMEOUT_S)
        self._drain.join(RPC_TIMEOUT_S)


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short directory for the provider's socket (tmp_path may exceed a unix socket path's 107 bytes)."""
    directory = Path(tempfile.mkdtemp(prefix="dps-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _commands(tmp_path: Path):
    fake, docker = fake_command(tmp_path / "state"), docker_command()
    return {"devsy-fake-runtime": (fake, SERVICE_MODULES + FAKE_MODULES),
            "devsy-provider-docker": (docker, SERVICE_MODULES + DOCKER_MODULES)}


@pytest.mark.parametrize("provider", ["devsy-fake-runtime", "devsy-provider-docker"])
def test_the_handshake_line_is_printed_before_the_service_and_backend_imports(tmp_path: Path, socket_dir: Path,
                                                                             provider: str) -> None:
    command, heavy = _commands(tmp_path)[provider]
    started = _Started(command.binary, command.args, command.env, socket_dir)
    try:
        assert "grpc" in started.before, "the line must come from a listening gRPC server"
        early = [name for name in heavy if name in started.before]
        assert early == [], f"{provider} imported {early} before its handshake line"
        # What the line promises: the address answers gRPC now; health first, then Info (which waits for the
        # services loaded after the line) and a call that reaches the backend.
        address = parse_line(started.line, provider).address
        with grpc.insecure_channel(f"unix:{address}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=HEALTH_SERVICE), timeout=RPC_TIMEOUT_S)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            stub = runtime_pb2_grpc.RuntimeDriverStub(channel)
            info = stub.Info(pb.InfoRequest(), timeout=RPC_TIMEOUT_S)
            assert (info.api_major, info.driver_name) == (1, "fake" if provider == "devsy-fake-runtime" else "docker")
            found = stub.Find(pb.FindRequest(workspace_id=f"startup-absent-{tmp_path.name[-8:]}"),
                              timeout=RPC_TIMEOUT_S)
            assert not found.found
        late = [name for name in heavy if name in started.after]
        assert late, f"{provider} answered Info without importing any of {heavy} after its line: not observed"
    finally:
        started.close()


def test_an_unusable_state_dir_still_exits_before_the_handshake(tmp_path: Path, socket_dir: Path) -> None:
    """What can be refused cheaply is still refused before the line (exit 1, the reason on stderr)."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    command = fake_command(blocker / "state")
    environ = {**os.environ, COOKIE_KEY: COOKIE_VALUE, ENV_PROTOCOL_VERSIONS: str(APP_PROTOCOL_VERSION),
               "PLUGIN_UNIX_SOCKET_DIR": str(socket_dir)}
    done = subprocess.run([command.binary, *command.args], env=environ, capture_output=True, text=True,  # noqa: S603
                          timeout=LINE_TIMEOUT_S, check=False)
    assert (done.returncode, done.stdout) == (1, "")
    assert "state directory" in done.stderr


def test_a_bad_docker_option_still_exits_before_the_handshake(socket_dir: Path) -> None:
    command = docker_command()
    environ = {**os.environ, COOKIE_KEY: COOKIE_VALUE, ENV_PROTOCOL_VERSIONS: str(APP_PROTOCOL_VERSION),
               "PLUGIN_UNIX_SOCKET_DIR": str(socket_dir), "STOP_TIMEOUT": "soon"}
    done = subprocess.run([command.binary, *command.args], env=environ, capture_output=True, text=True,  # noqa: S603
                          timeout=LINE_TIMEOUT_S, check=False)
    assert (done.returncode, done.stdout) == (1, "")
    assert "STOP_TIMEOUT" in done.stderr


def test_the_host_launches_both_providers_and_reads_info(tmp_path: Path) -> None:
    """Through devsy's own host (supervisor, handshake, health, Info) as devsy does it."""
    for command, _ in _commands(tmp_path).values():
        with running(command) as provider:
            assert provider.client.info().driver_name in ("fake", "docker")
