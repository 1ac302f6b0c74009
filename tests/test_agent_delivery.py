"""Agent delivery into a real container: checksum and mode, skip when present, offline override, retries with a
fresh source each time (each closed exactly once), cancellation, and refusal of wrong bytes."""

from __future__ import annotations

import hashlib
import io
import shutil
import threading

import pytest

from helpers.cli import HOST_NET
from helpers.projects import make_project
from devsy.agent.artifact import AgentArtifact, resolve_artifact
from devsy.agent.build import build_agent
from devsy.agent.delivery import GUEST_DIR, StreamDelivery, guest_agent_path
from devsy.agent.errors import AgentError
from devsy.driver.base import CancelToken
from devsy.driver.docker.driver import DockerDriver
from devsy.errors import Cancelled


@pytest.fixture(scope="module")
def agent() -> AgentArtifact:
    return resolve_artifact(build_agent().arch)


def _guest(docker_client, workspace: str):
    return docker_client.containers.list(filters={"label": f"dev.devsy.workspace={workspace}"})[0]


def _sh(container, script: str) -> str:
    result = container.exec_run(["sh", "-c", script], user="0")
    assert result.exit_code == 0, result.output
    return result.output.decode().strip()


def _checksum_and_mode(container, path: str) -> tuple[str, str]:
    return _sh(container, f"sha256sum {path} | cut -d' ' -f1"), _sh(container, f"stat -c %a {path}")


def test_up_streams_the_agent_with_matching_checksum_and_mode(devsy, running_workspace, docker_client, agent):
    path = guest_agent_path(agent.sha256)
    assert _checksum_and_mode(_guest(docker_client, running_workspace), path) == (agent.sha256, "755")
    assert agent.path.stat().st_mode & 0o777 == 0o755


def test_delivery_is_skipped_when_the_guest_has_the_same_checksum(running_workspace, docker_client, agent):
    container = _guest(docker_client, running_workspace)
    path = guest_agent_path(agent.sha256)
    inode_before = _sh(container, f"stat -c %i {path}")
    opened: list[int] = []

    def opener():
        opened.append(1)
        return agent.open()

    delivered = StreamDelivery().deliver(DockerDriver(), running_workspace, agent, CancelToken(), opener)
    assert (delivered.transferred, delivered.attempts, opened) == (False, 0, [])
    assert _sh(container, f"stat -c %i {path}") == inode_before


class CountingSource(io.RawIOBase):
    """A source that counts its close() calls; `fail_after` bytes into the transfer it breaks like a lost link."""

    def __init__(self, data: bytes, fail_after: int | None = None, block_after: int | None = None) -> None:
        super().__init__()
        self._data = io.BytesIO(data)
        self._fail_after, self._block_after = fail_after, block_after
        self.close_calls = 0
        self.blocked = threading.Event()
        self._unblock = threading.Event()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        position = self._data.tell()
        if self._fail_after is not None and position >= self._fail_after:
            raise OSError("simulated interruption of the transfer")
        if self._block_after is not None and position >= self._block_after:
            self.blocked.set()
            self._unblock.wait()
            return 0
        limit = len(buffer)
        for bound in (self._fail_after, self._block_after):
            if bound is not None:
                limit = min(limit, bound - position)
        chunk = self._data.read(limit)
        buffer[: len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        if not self.closed:
            self.close_calls += 1
            self._unblock.set()
        super().close()


def _fresh_workspace(devsy, ws_id, guest_image, tmp_path) -> str:
    # Without DEVSY_AGENT_BINARY tricks: a workspace where we then remove the delivered agent again.
    devsy.up(make_project(tmp_path / "delivery-project", {"image": guest_image}), "--id", ws_id, *HOST_NET)
    return ws_id


def test_retry_opens_a_fresh_source_and_closes_each_exactly_once(devsy, ws_id, guest_image, tmp_path,
                                                                docker_client, agent):
    workspace = _fresh_workspace(devsy, ws_id, guest_image, tmp_path)
    container = _guest(docker_client, workspace)
    _sh(container, f"rm -rf {GUEST_DIR}")
    data = agent.path.read_bytes()
    sources: list[CountingSource] = []

    def factory() -> CountingSource:
        # The first attempt breaks a third of the way through; later attempts are whole.
        source = CountingSource(data, fail_after=len(data) // 3 if not sources else None)
        sources.append(source)
        return source

    delivery = StreamDelivery(attempts=3, backoff_s=0.05)
    delivered = delivery.deliver(DockerDriver(), workspace, agent, CancelToken(), factory)
    assert (delivered.transferred, delivered.attempts) == (True, 2)
    assert len(sources) == 2 and sources[0] is not sources[1]
    assert [s.close_calls for s in sources] == [1, 1]
    assert _checksum_and_mode(container, delivered.guest_path) == (agent.sha256, "755")
    assert _sh(container, f"ls -A {GUEST_DIR}") == delivered.guest_path.rsplit("/", 1)[1]  # no temp files left


def test_wrong_bytes_are_refused_and_nothing_is_left_half_installed(devsy, ws_id, guest_image, tmp_path,
                                                                    docker_client, agent):
    workspace = _fresh_workspace(devsy, ws_id, guest_image, tmp_path)
    container = _guest(docker_client, workspace)
    _sh(container, f"rm -rf {GUEST_DIR}")
    sources: list[CountingSource] = []

    def factory() -> CountingSource:
        sources.append(CountingSource(b"not the agent"))
        return sources[-1]

    with pytest.raises(AgentError, match="checksum mismatch"):
        StreamDelivery(attempts=2, backoff_s=0.05).deliver(DockerDriver(), workspace, agent, CancelToken(), factory)
    assert [s.close_calls for s in sources] == [1, 1]
    assert _sh(container, f"ls -A {GUEST_DIR}") == ""


def test_cancel_closes_the_source_and_returns(devsy, ws_id, guest_image, tmp_path, docker_client, agent):
    workspace = _fresh_workspace(devsy, ws_id, guest_image, tmp_path)
    _sh(_guest(docker_client, workspace), f"rm -rf {GUEST_DIR}")
    source = CountingSource(agent.path.read_bytes(), block_after=1 << 20)  # a transfer that stalls mid-way
    cancel = CancelToken()
    threading.Thread(target=lambda: source.blocked.wait(60) and cancel.cancel(), daemon=True).start()
    with pytest.raises(Cancelled):
        StreamDelivery(attempts=3).deliver(DockerDriver(), workspace, agent, cancel, lambda: source)
    assert source.close_calls == 1
    assert not [t for t in threading.enumerate() if t.name == "devsy-exec-stdin"], "the copier was not joined"


def test_agent_binary_override_delivers_that_file_offline(devsy, ws_id, guest_image, tmp_path, docker_client, agent):
    offline = tmp_path / "my-agent.pyz"
    shutil.copy(agent.path, offline)
    empty_cache = tmp_path / "empty-cache"
    empty_cache.mkdir()
    env = {"DEVSY_AGENT_BINARY": str(offline), "DEVSY_CACHE_DIR": str(empty_cache),
           # Any download attempt would go here and fail: nothing listens on the discard port.
           "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_INDEX": "1"}
    devsy.up(make_project(tmp_path / "offline-project", {"image": guest_image}), "--id", ws_id, *HOST_NET,
             extra_env=env)
    assert list(empty_cache.iterdir()) == []  # nothing was built or downloaded
    sha = hashlib.sha256(offline.read_bytes()).hexdigest()
    assert _checksum_and_mode(_guest(docker_client, ws_id), guest_agent_path(sha)) == (sha, "755")
    assert devsy.run("ssh", ws_id, "--command", "echo offline-ok", extra_env=env).stdout == b"offline-ok\n"
