"""The SDK-free engine reader (devsy/driver/docker/engine_reader.py) against the real engine and the SDK itself,
its errors against sockets that are no engine, and the commands that only look at the engine not importing the SDK."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from devsy.driver.base import LABEL_MANAGED, LABEL_WORKSPACE
from devsy.driver.docker.driver import DockerDriver
from devsy.driver.docker.engine import engine_address
from devsy.driver.docker.engine_reader import EngineReader, local_socket
from devsy.errors import BackendUnavailable, DriverError
from helpers.cli import HOST_NET, imported_modules


def _engine_socket() -> str:
    """The engine's socket, read as the driver reads it; these tests compare the two paths, so the engine must be
    the reader's kind (a unix socket), not skipped into a pass."""
    path = local_socket()
    assert path is not None, f"DOCKER_HOST={engine_address()} is not a unix socket: the reader is not used here"
    return path


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, "/var/run/docker.sock"),
    ({"DOCKER_HOST": "unix:///run/user/1000/docker.sock"}, "/run/user/1000/docker.sock"),
    ({"DOCKER_HOST": " unix:///var/run/docker.sock \n"}, "/var/run/docker.sock"),
    ({"DOCKER_HOST": "tcp://127.0.0.1:2375"}, None),
    ({"DOCKER_HOST": "ssh://me@host"}, None),
    ({"DOCKER_HOST": "unix:///var/run/docker.sock", "DOCKER_TLS_VERIFY": "1"}, None),
    ({"DOCKER_HOST": "unix:///var/run/docker.sock", "DOCKER_CERT_PATH": "/certs"}, None),
    # Forms URL parsing rewrites are left to the SDK, so the two never reach different sockets.
    ({"DOCKER_HOST": "unix://"}, None),
    ({"DOCKER_HOST": "unix://var/run/docker.sock"}, None),
    ({"DOCKER_HOST": "unix:///var/run/docker.sock/"}, None),
    ({"DOCKER_HOST": "unix://me@tmp/docker.sock"}, None),
    ({"DOCKER_HOST": "unix:///var/run/docker.sock?x=1"}, None),
    ({"DOCKER_HOST": "unix:///var/run/d\tocker.sock"}, None),
])
def test_only_a_plain_unix_socket_is_read_without_the_sdk(monkeypatch, environ, expected):
    for name in ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert local_socket() == expected


@pytest.mark.parametrize("address", [
    "unix:///var/run/docker.sock", "unix:///run/docker.sock", "unix:////var/run/docker.sock",
    "unix:///tmp/a-b_c.d+e/engine.sock", " unix:///var/run/docker.sock ", "unix:///var/run/docker.sock/",
    "unix://var/run/docker.sock", "unix://TMP/x.sock", "unix://me@tmp/x.sock", "unix://tmp:0/x.sock",
    "unix:///var/run/d%41.sock", "unix:///a?b", "unix:///a#b", "unix://", "unix:///", "UNIX:///var/run/docker.sock",
])
def test_a_socket_the_reader_takes_is_the_one_the_sdk_takes(monkeypatch, address):
    from docker.utils.utils import parse_host

    monkeypatch.setenv("DOCKER_HOST", address)
    for name in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        monkeypatch.delenv(name, raising=False)
    ours = local_socket()
    if ours is None:
        return  # the SDK alone reaches this engine
    # The SDK's own resolution: parse_host, then its unix adapter's path (docker/transport/unixconn.py).
    sdk = parse_host(address.strip(), is_win32=False).removeprefix("http+unix://")
    assert ours == (sdk if sdk.startswith("/") else "/" + sdk)


def test_the_reader_sees_what_the_sdk_sees(devsy, ws_id, guest_image, docker_client):
    devsy.up(guest_image, "--id", ws_id, *HOST_NET)
    labels = [f"{LABEL_MANAGED}=true", f"{LABEL_WORKSPACE}={ws_id}"]
    reader = EngineReader(_engine_socket())
    [listed] = reader.containers(labels, "listing")
    [container] = docker_client.containers.list(all=True, filters={"label": labels})
    assert listed["Id"] == container.id
    container.reload()
    assert reader.inspect(listed["Id"], "inspecting") == container.attrs
    # The driver's own view is the same through either path.
    assert DockerDriver()._reader is not None  # noqa: SLF001 - the comparison below is reader against SDK
    assert DockerDriver().find(ws_id) == DockerDriver(client=docker_client).find(ws_id)
    assert reader.containers([f"{LABEL_WORKSPACE}=no-such-{ws_id}"], "listing") == []


def test_a_container_gone_since_it_was_listed_is_none(docker_client):
    assert EngineReader(_engine_socket()).inspect("0" * 64, "inspecting") is None


def test_two_containers_of_one_workspace_are_an_error_on_the_reader_path(ws_id, guest_image, docker_client):
    labels = {LABEL_MANAGED: "true", LABEL_WORKSPACE: ws_id}
    created = []
    try:
        for _ in range(2):
            created.append(docker_client.containers.create(guest_image, ["true"], labels=labels))
        driver = DockerDriver()
        assert driver._reader is not None  # noqa: SLF001
        with pytest.raises(DriverError) as raised:
            driver.find(ws_id)
        assert "has 2 containers" in raised.value.message and "devsy delete" in raised.value.hint
    finally:
        for container in created:
            container.remove(force=True)


def test_no_engine_is_backend_unavailable(tmp_path):
    with pytest.raises(BackendUnavailable) as raised:
        EngineReader(str(tmp_path / "no-daemon.sock")).ping("connecting to the Docker engine")
    assert "cannot reach the Docker engine" in raised.value.message and "dockerd" in raised.value.hint


def _http(status: str, body: bytes = b"") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


class _OneAnswerServer:
    """A unix socket answering each request with raw HTTP: `answer`, or by path the first entry of `answers` whose
    key starts the request's path (an empty answer closes the connection at once)."""

    def __init__(self, path: Path, answer: bytes = b"", answers: dict[str, bytes] | None = None) -> None:
        self.path, self._answer, self._answers = str(path), answer, answers or {}
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
                request = conn.recv(65536)
                if not request:
                    return  # close()'s wake-up connection
                target = request.split(b" ", 2)[1].decode()
                answer = next((a for prefix, a in self._answers.items() if target.startswith(prefix)), self._answer)
                if answer:
                    conn.sendall(answer)

    def close(self) -> None:
        # accept() is not woken by closing the listener: a connection that sends nothing ends the loop.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as wake:
            wake.connect(self.path)
        self._thread.join(10)
        self._listener.close()
        assert not self._thread.is_alive()


@pytest.mark.parametrize(("answer", "error", "says"), [
    (b'HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n'
     b'{"message":"engine broken"}', DriverError, "listing: engine broken"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nnot json!", DriverError, "not JSON"),
    (_http("200 OK", b"{}"), DriverError, "not a JSON list"),
    (_http("200 OK", b'[{"Names": ["/x"]}]'), DriverError, "a container without an Id"),
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


def test_an_engine_that_refuses_the_ping_is_unavailable(tmp_path):
    # A daemon shutting down, or a socket proxy denying us: the backend cannot be used, as the SDK's connect says.
    server = _OneAnswerServer(tmp_path / "engine.sock", b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
    try:
        with pytest.raises(BackendUnavailable) as raised:
            EngineReader(server.path, timeout=10).ping("connecting to the Docker engine")
        assert "403" in raised.value.message and "dockerd" in raised.value.hint
    finally:
        server.close()


def test_an_engine_that_refuses_the_ping_is_unavailable_on_the_sdk_path_too(tmp_path):
    import docker

    server = _OneAnswerServer(tmp_path / "engine.sock", _http("403 Forbidden"),
                              answers={"/version": _http("200 OK", b'{"ApiVersion": "1.41", "Version": "20.10"}')})
    try:
        client = docker.DockerClient(base_url=f"unix://{server.path}", version="1.41", timeout=10)
        with pytest.raises(BackendUnavailable) as raised:
            DockerDriver(client=client).open_backend()
        assert "403" in raised.value.message and "dockerd" in raised.value.hint
    finally:
        server.close()


def test_the_sdk_client_is_made_once_when_threads_ask_together(monkeypatch):
    import devsy.driver.docker.driver as driver_module

    made: list[object] = []
    another = threading.Event()

    def slow_connect():
        made.append(object())
        if len(made) > 1:
            another.set()
        else:
            # Unlocked, the other threads come in here meanwhile (and end the wait); locked, none can.
            another.wait(1.0)
        return made[0]

    monkeypatch.setattr(driver_module, "connect", slow_connect)
    driver = DockerDriver()
    clients: list[object] = []
    threads = [threading.Thread(target=lambda: clients.append(driver.client)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(made) == 1 and len(clients) == 8 and all(client is made[0] for client in clients)


def test_commands_that_only_look_do_not_import_the_sdk(devsy, ws_id, guest_image):
    devsy.up(guest_image, "--id", ws_id, *HOST_NET)
    profile = {"PYTHONPROFILEIMPORTTIME": "1"}
    reused = devsy.up(guest_image, "--id", ws_id, extra_env=profile)
    assert reused.json["workspace"]["reused"] is True
    status = devsy.run("status", ws_id, "--json", extra_env=profile)
    assert status.returncode == 0 and status.json["workspace"]["status"] == "running"
    for result in (reused, status):
        modules = imported_modules(result.stderr)
        assert "devsy.driver.docker.engine_reader" in modules  # the profile did cover the command
        assert not {"docker", "requests", "urllib3"} & modules
    # A command that changes the instance does take the SDK; the reader then sees the instance stopped.
    stopped = devsy.run("stop", ws_id, "--json", extra_env=profile)
    assert stopped.returncode == 0 and "docker" in imported_modules(stopped.stderr)
    assert devsy.run("status", ws_id, "--json").json["workspace"]["status"] == "stopped"


def test_the_docker_provider_answers_info_preflight_and_find_without_the_sdk(devsy, ws_id, guest_image):
    devsy.up(guest_image, "--id", ws_id, *HOST_NET)
    probe = (
        "import sys\n"
        "from devsy.providers.docker_driver import DockerProviderDriver, engine_version\n"
        "driver = DockerProviderDriver()\n"
        "driver.preflight()\n"
        "assert engine_version(driver), 'no engine version'\n"
        f"assert driver.find({ws_id!r}).running\n"
        "print(sorted(m for m in ('docker', 'requests', 'urllib3') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"[]\n"
