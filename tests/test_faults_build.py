"""Image preparation fails as a devsy error, never a traceback; and every layer devsy builds is found by `delete`.

The engine vanishing is simulated with a socket this test owns (a relay to the real engine that goes away when
devsy asks for the built image); the shared dockerd is never stopped.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from devsy.bounded_wait import wait_until
from helpers.cli import DEVSY, HOST_NET, cli_env
from helpers.projects import make_project
from devsy.devcontainer.build_context import Limits, context_archive
from devsy.devcontainer.config import BuildConfig
from devsy.devcontainer.image_prepare import remove_built_images
from devsy.driver.docker.engine import engine_address
from devsy.errors import ImageError

# The relay forwards to the engine DOCKER_HOST names (a unix socket), not to a fixed path that may be no engine.
REAL_ENGINE = engine_address().removeprefix("unix://")


@pytest.fixture
def built_ws(ws_id):
    """A workspace id whose build layers are removed after the test (conftest removes tagged images only)."""
    yield ws_id
    remove_built_images(ws_id)


def _no_traceback(result) -> None:
    assert b"Traceback" not in result.stderr, result.stderr.decode()


class VanishingEngine:
    """A unix socket relaying to the real engine; when a request for `trigger` arrives, it closes every connection
    and removes itself, as a dockerd that died would."""

    def __init__(self, path: Path, trigger: bytes) -> None:
        self.path, self.trigger = path, trigger
        self.vanished = threading.Event()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.vanished.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(REAL_ENGINE)
            with self._lock:
                self._conns += [client, engine]
            threading.Thread(target=self._pump, args=(client, engine, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(engine, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, watch: bool) -> None:
        seen = b""
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                return
            seen = (seen + data)[-(len(self.trigger) + 65536):]
            if watch and self.trigger in seen:
                self.vanish()
                return
            try:
                dst.sendall(data)
            except OSError:
                return

    def vanish(self) -> None:
        self.vanished.set()
        self._listener.close()
        self.path.unlink(missing_ok=True)
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()


def test_engine_gone_between_build_and_image_lookup_is_a_devsy_error(devsy, built_ws, guest_image, tmp_path):
    project = make_project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}})
    (project / ".devcontainer" / "Dockerfile").write_text(f"FROM {guest_image}\nRUN echo {built_ws}\n")
    engine = VanishingEngine(tmp_path / "engine.sock", trigger=f"/images/devsy-build-{built_ws}".encode())
    result = devsy.up(project, "--id", built_ws, *HOST_NET, ok=False,
                      extra_env={"DOCKER_HOST": f"unix://{engine.path}"})
    assert engine.vanished.is_set(), "the build never reached the image lookup: " + result.stderr.decode()
    assert result.returncode == 1
    _no_traceback(result)
    error = result.json["error"]
    assert error["type"] == "backend-unavailable" and error["hint"]
    assert "looking up the built image" in error["message"]


def test_the_filesystem_root_as_build_context_is_refused_at_once(devsy, built_ws, guest_image, tmp_path):
    project = make_project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile", "context": "/"}})
    (project / ".devcontainer" / "Dockerfile").write_text(f"FROM {guest_image}\n")
    result = devsy.up(project, "--id", built_ws, *HOST_NET, ok=False, timeout=60)
    assert result.returncode != 0
    _no_traceback(result)
    error = result.json["error"]
    assert error["type"] == "config" and "filesystem root" in error["message"] and "build.context" in error["hint"]


def _without_read_override(cmd: list[str]) -> list[str]:
    """`cmd` run as root without the capabilities that let root read any file, so mode 000 means unreadable."""
    drop = "-dac_override,-dac_read_search"
    return ["setpriv", "--bounding-set", drop, "--inh-caps", drop, *cmd]


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_an_unreadable_file_in_the_context_is_named_in_an_image_error(devsy, built_ws, guest_image, tmp_path):
    project = make_project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}})
    (project / ".devcontainer" / "Dockerfile").write_text(f"FROM {guest_image}\n")
    locked = project / ".devcontainer" / "locked.key"
    locked.write_text("unreadable")
    locked.chmod(0)
    probe = subprocess.run(_without_read_override(["cat", str(locked)]), capture_output=True)
    assert probe.returncode != 0, "the file must be unreadable for the devsy under test"
    env = cli_env(devsy)
    argv = [*DEVSY, "up", str(project), "--id", built_ws, *HOST_NET, "--json"]
    proc = subprocess.run(_without_read_override(argv), capture_output=True, env=env, timeout=180)
    assert proc.returncode != 0
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    error = json.loads(proc.stdout)["error"]
    assert error["type"] == "image" and "locked.key" in error["message"] and ".dockerignore" in error["hint"]


def _folder(root: Path, files: dict[str, int]) -> Path:
    root.mkdir()
    for name, size in files.items():
        (root / name).write_bytes(b"x" * size)
    return root


def test_a_context_beyond_the_size_bound_stops_with_an_image_error(tmp_path):
    context = _folder(tmp_path / "ctx", {"Dockerfile": 10, "big.bin": 4096})
    build = BuildConfig(dockerfile=context / "Dockerfile", context=context)
    with pytest.raises(ImageError, match="more than"):
        context_archive(build, "FROM x\n", Limits(max_bytes=1024))
    (context / ".dockerignore").write_text("big.bin\n")  # what is excluded is not sent, so it does not count
    context_archive(build, "FROM x\n", Limits(max_bytes=1024)).close()


def test_a_context_beyond_the_entry_bound_stops_with_an_image_error(tmp_path):
    context = _folder(tmp_path / "ctx", {f"f{i}": 1 for i in range(20)})
    build = BuildConfig(dockerfile=context / "f0", context=context)
    with pytest.raises(ImageError, match="more than 10 files"):
        context_archive(build, "FROM x\n", Limits(max_entries=10))


def _wait_for(predicate, what: str, timeout: float = 120):
    wait_until(predicate, timeout=timeout, interval=0.2, what=what)


def _interrupt_a_build(devsy, workspace_id: str, project: Path, guest_image: str, docker_client) -> list[str]:
    """Start `devsy up` on a build whose last step runs until cancelled, SIGKILL devsy there, and return the ids of
    the layers the build had committed (read from its output, not found by label)."""
    marker = f"building-{workspace_id}"
    (project / ".devcontainer" / "Dockerfile").write_text(
        f"FROM {guest_image}\nENV STEP={workspace_id}\nRUN echo {workspace_id} > /layer\n"
        f"RUN echo {marker} && sleep 600\n")
    proc = subprocess.Popen([*DEVSY, "up", str(project), "--id", workspace_id, *HOST_NET],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env(devsy),
                            start_new_session=True)
    try:
        lines = _lines_until(proc, marker, timeout=180)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    layers = _committed_layers(lines)
    assert layers, "the build committed no layer before the interrupted step"
    # The engine cancels the build when its client is gone; its last container goes with it.
    # ignore_removed: the engine may remove that container between the listing and its inspection.
    _wait_for(lambda: not docker_client.containers.list(all=True, filters={"ancestor": layers[-1]},
                                                        ignore_removed=True),
              "the cancelled build's container to be removed")
    return layers


def test_layers_of_a_build_interrupted_by_sigkill_are_removed_by_delete(devsy, built_ws, guest_image, tmp_path,
                                                                         docker_client):
    project = make_project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}})
    layers = _interrupt_a_build(devsy, built_ws, project, guest_image, docker_client)
    result = devsy.run("delete", built_ws, "--json")
    assert result.returncode == 0, result.text
    left = [layer for layer in layers if _image_exists(docker_client, layer)]
    assert left == [], f"layers of the interrupted build left after delete: {left}"


def test_the_next_up_reuses_what_an_interrupted_build_left(devsy, built_ws, guest_image, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}})
    layers = _interrupt_a_build(devsy, built_ws, project, guest_image, docker_client)
    dockerfile = project / ".devcontainer" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("sleep 600", "true"))
    result = devsy.up(project, "--id", built_ws, *HOST_NET)
    reused = _committed_layers([line.strip() for line in result.stderr.decode().splitlines()])
    assert set(layers) <= set(reused), f"committed before the interrupt {layers}, used now {reused}"
    assert devsy.run("delete", built_ws, "--json").returncode == 0
    left = [layer for layer in reused if _image_exists(docker_client, layer)]
    assert left == [], f"layers left after delete: {left}"


def _lines_until(proc: subprocess.Popen, marker: str, timeout: float) -> list[str]:
    """The stderr lines of `proc` up to the one that is `marker`; bounded by `timeout`."""
    deadline, buffer = time.monotonic() + timeout, b""
    fd = proc.stderr.fileno()  # type: ignore[union-attr]
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {marker!r} line within {timeout:.0f}s: {buffer[-2000:].decode(errors='replace')}"
        ready, _, _ = select.select([fd], [], [], remaining)
        chunk = os.read(fd, 65536) if ready else b""
        if ready and not chunk:
            raise AssertionError(f"devsy up ended before {marker!r}: {buffer[-2000:].decode(errors='replace')}")
        buffer += chunk
        lines = [line.strip() for line in buffer.decode(errors="replace").splitlines()]
        if marker in lines:
            return lines


def _committed_layers(lines: list[str]) -> list[str]:
    """The image ids the build output says were committed after its FROM step (the base is not the build's)."""
    step, layers = 0, []
    for line in lines:
        if line.startswith("Step "):
            step = int(line.split()[1].split("/")[0])
        elif line.startswith("---> ") and step > 1 and not line.startswith(("---> Running", "---> Using")):
            layers.append(line.split()[1])
    return layers


def _image_exists(client, image_id: str) -> bool:
    import docker.errors

    try:
        client.images.get(image_id)
    except docker.errors.ImageNotFound:
        return False
    return True


def test_a_failed_first_up_removes_the_layers_it_built(devsy, built_ws, guest_image, tmp_path, docker_client):
    """No record is left to `devsy delete` by, so the failed attempt itself removes what its build committed."""
    project = make_project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}})
    (project / ".devcontainer" / "Dockerfile").write_text(
        f"FROM {guest_image}\nRUN echo {built_ws} > /layer\nRUN exit 3\n")
    result = devsy.up(project, "--id", built_ws, *HOST_NET, ok=False)
    assert result.returncode != 0 and not (devsy.home / "workspaces" / built_ws).exists(), result.text
    left = docker_client.images.list(all=True, filters={"label": f"dev.devsy.workspace={built_ws}"})
    assert left == [], f"layers of the failed first up left behind: {[image.id for image in left]}"
