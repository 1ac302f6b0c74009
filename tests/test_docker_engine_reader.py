"""The SDK-free engine reader (devsy/driver/docker/engine_reader.py) against the real engine and the SDK itself,
its errors against sockets that are no engine, and the commands that only look at the engine not importing the SDK."""

from __future__ import annotations

import re
import socket
import threading
from pathlib import Path

import pytest

from devsy.driver.base import LABEL_MANAGED, LABEL_WORKSPACE
from devsy.driver.docker.driver import DockerDriver
from devsy.driver.docker.engine import engine_address
from devsy.driver.docker.engine_reader import EngineReader, local_socket
from devsy.errors import BackendUnavailable, DriverError
from helpers.cli import HOST_NET

ENGINE_SOCKET = engine_address().removeprefix("unix://")


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, "/var/run/docker.sock"),
    ({"DOCKER_HOST": "unix:///run/user/1000/docker.sock"}, "/run/user/1000/docker.sock"),
    ({"DOCKER_HOST": "tcp://127.0.0.1:2375"}, None),
    ({"DOCKER_HOST": "ssh://me@host"}, None),
    ({"DOCKER_HOST": "unix:///var/run/docker.sock", "DOCKER_TLS_VERIFY": "1"}, None),
    ({"DOCKER_HOST": "unix://"}, None),
])
def test_only_a_plain_unix_socket_is_read_without_the_sdk(monkeypatch, environ, expected):
    for name in ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert local_socket() == expected


def test_the_reader_sees_what_the_sdk_sees(devsy, ws_id, guest_image, docker_client):
    devsy.up(guest_image, "--id", ws_id, *HOST_NET)
    labels = [f"{LABEL_MANAGED}=true", f"{LABEL_WORKSPACE}={ws_id}"]
    reader = EngineReader(ENGINE_SOCKET)
    [listed] = reader.containers(labels, "listing")
    [container] = docker_client.containers.list(all=True, filters={"label": labels})
    assert listed["Id"] == container.id
    container.reload()
    assert reader.inspect(listed["Id"], "inspecting") == container.attrs
    # The driver's own view is the same through either path.
    assert DockerDriver().find(ws_id) == DockerDriver(client=docker_client).find(ws_id)
    assert reader.containers([f"{LABEL_WORKSPACE}=no-such-{ws_id}"], "listing") == []


def test_a_container_gone_since_it_was_listed_is_none(docker_client):
    assert EngineReader(ENGINE_SOCKET).inspect("0" * 64, "inspecting") is None


def test_no_engine_is_backend_unavailable(tmp_path):
    with pytest.raises(BackendUnavailable) as raised:
        EngineReader(str(tmp_path / "no-daemon.sock")).ping("connecting to the Docker engine")
    assert "cannot reach the Docker engine" in raised.value.message and "dockerd" in raised.value.hint


class _OneAnswerServer:
    """A unix socket that answers every request with `answer` (raw HTTP), or closes at once when it is empty."""

    def __init__(self, path: Path, answer: bytes) -> None:
        self.path, self._answer = str(path), answer
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(4)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                if self._answer:
                    conn.sendall(self._answer)

    def close(self) -> None:
        self._listener.close()


@pytest.mark.parametrize(("answer", "error", "says"), [
    (b'HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n'
     b'{"message":"engine broken"}', DriverError, "listing: engine broken"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nnot json!", DriverError, "not JSON"),
    (b"", BackendUnavailable, "cannot reach the Docker engine"),
])
def test_an_engine_that_fails_is_a_typed_error(tmp_path, answer, error, says):
    server = _OneAnswerServer(tmp_path / "engine.sock", answer)
    try:
        with pytest.raises(error) as raised:
            EngineReader(server.path, timeout=10).containers(["a=b"], "listing")
        assert says in raised.value.message
    finally:
        server.close()


def _imported_modules(stderr: bytes) -> set[str]:
    """The modules a run imported, from its PYTHONPROFILEIMPORTTIME lines."""
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", stderr.decode(), re.MULTILINE))


def test_commands_that_only_look_do_not_import_the_sdk(devsy, ws_id, guest_image):
    devsy.up(guest_image, "--id", ws_id, *HOST_NET)
    profile = {"PYTHONPROFILEIMPORTTIME": "1"}
    reused = devsy.up(guest_image, "--id", ws_id, extra_env=profile)
    assert reused.json["workspace"]["reused"] is True
    status = devsy.run("status", ws_id, "--json", extra_env=profile)
    assert status.returncode == 0 and status.json["workspace"]["status"] == "running"
    for result in (reused, status):
        modules = _imported_modules(result.stderr)
        assert "devsy.driver.docker.engine_reader" in modules  # the profile did cover the command
        assert not {"docker", "requests", "urllib3"} & modules
    # A command that changes the instance does take the SDK.
    stopped = devsy.run("stop", ws_id, "--json", extra_env=profile)
    assert stopped.returncode == 0 and "docker" in _imported_modules(stopped.stderr)
