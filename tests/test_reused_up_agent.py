"""A reused `devsy up` proves from the host that the agent is in place and then runs nothing in the guest; each
thing that breaks the proof (the agent removed or changed in the guest, another agent on the host, another
instance) makes it check and deliver in the guest again. Observed on the real engine: its exec_create events."""

from __future__ import annotations

import hashlib
import shutil
import time
import zipfile

import pytest

from helpers.cli import HOST_NET
from helpers.projects import make_project
from devsy.agent.artifact import resolve_artifact
from devsy.agent.build import build_agent
from devsy.agent.delivery import guest_agent_path
from devsy.agent.host_view import agent_stamp
from devsy.driver.base import ContainerDetails, InstanceMount, InstanceStatus


def _container(docker_client, workspace: str):
    return docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={workspace}"})[0]


def _sh(container, script: str) -> str:
    result = container.exec_run(["sh", "-c", script], user="0")
    assert result.exit_code == 0, result.output
    return result.output.decode().strip()


def _up_counting_execs(devsy, project, ws_id, docker_client, **kw) -> int:
    """Run a reused `devsy up`; how many execs the engine created in the workspace's container meanwhile."""
    started = time.time_ns()
    devsy.up(project, "--id", ws_id, **kw)
    ended = time.time_ns()
    container = _container(docker_client, ws_id)
    events = docker_client.events(since=started // 10**9 - 1, until=ended // 10**9 + 1, decode=True,
                                  filters={"container": container.id, "event": "exec_create"})
    return sum(1 for event in events if started <= event["timeNano"] <= ended)


@pytest.fixture
def workspace(devsy, ws_id, guest_image, tmp_path):
    project = make_project(tmp_path / "project", {"image": guest_image})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    return project


@pytest.fixture(scope="module")
def agent_sha() -> str:
    return resolve_artifact(build_agent().arch).sha256


def test_a_reused_up_runs_nothing_in_the_guest_and_ssh_still_works(devsy, ws_id, workspace, docker_client):
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client) == 0
    result = devsy.run("ssh", ws_id, "--command", "echo in-guest")
    assert (result.returncode, result.stdout) == (0, b"in-guest\n"), result.text


def test_a_stopped_instance_is_started_and_its_agent_is_still_proven(devsy, ws_id, workspace, docker_client):
    assert devsy.run("stop", ws_id).returncode == 0
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client) == 0
    container = _container(docker_client, ws_id)
    assert container.status == "running"
    assert devsy.run("ssh", ws_id, "--command", "true").returncode == 0


def test_an_agent_removed_in_the_guest_is_delivered_again(devsy, ws_id, workspace, docker_client, agent_sha):
    container = _container(docker_client, ws_id)
    _sh(container, f"rm -f {guest_agent_path(agent_sha)}")
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client) > 0
    assert _sh(container, f"sha256sum {guest_agent_path(agent_sha)} | cut -d' ' -f1") == agent_sha


def test_an_agent_changed_in_the_guest_is_delivered_again(devsy, ws_id, workspace, docker_client, agent_sha):
    container = _container(docker_client, ws_id)
    path = guest_agent_path(agent_sha)
    size = _sh(container, f"stat -c %s {path}")
    # Same size, other bytes: only the look from the host (modification time, inode) gives it away.
    _sh(container, f"head -c {size} /dev/zero > {path}.new && chmod 755 {path}.new && mv -f {path}.new {path}")
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client) > 0
    assert _sh(container, f"sha256sum {path} | cut -d' ' -f1") == agent_sha


def test_another_agent_on_the_host_is_delivered(devsy, ws_id, workspace, docker_client, agent_sha, tmp_path):
    other = tmp_path / "agent-variant.pyz"
    shutil.copyfile(build_agent().path, other)
    with zipfile.ZipFile(other, "a") as archive:  # still a working zipapp, with other bytes
        archive.comment = b"a variant of the agent"
    other_sha = hashlib.sha256(other.read_bytes()).hexdigest()
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client,
                              extra_env={"DEVSY_AGENT_BINARY": str(other)}) > 0
    container = _container(docker_client, ws_id)
    assert _sh(container, f"sha256sum {guest_agent_path(other_sha)} | cut -d' ' -f1") == other_sha
    # Back to the usual agent: that one is delivered (again), then proven without a round trip.
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client) > 0
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client) == 0


def test_a_recreated_instance_is_checked_in_the_guest(devsy, ws_id, workspace, docker_client):
    devsy.up(workspace, "--id", ws_id, "--recreate")
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client) == 0  # the recreating up noted the new one


# The host view itself, on a folder standing in for an instance's root (no engine needed to check these rules).

def _details(root, *mounts: str) -> ContainerDetails:
    return ContainerDetails(id="c1", created_at="t", status=InstanceStatus.RUNNING, host_root=str(root),
                            mounts=[InstanceMount(type="bind", source="/src", destination=m) for m in mounts])


@pytest.fixture
def root(tmp_path):
    agent = tmp_path / "root" / "usr" / "local" / "lib" / "devsy" / "agent-x.pyz"
    agent.parent.mkdir(parents=True)
    agent.write_bytes(b"agent")
    agent.chmod(0o755)
    return tmp_path / "root"


GUEST = "/usr/local/lib/devsy/agent-x.pyz"


def test_the_stamp_changes_with_the_file(root):
    before = agent_stamp(_details(root), GUEST)
    assert before.startswith("5:")
    (root / GUEST.lstrip("/")).write_bytes(b"other")
    assert agent_stamp(_details(root), GUEST) not in ("", before)


@pytest.mark.parametrize("mount", ["/", "/usr", "/usr/local/lib/devsy", GUEST])
def test_no_stamp_where_a_mount_hides_the_file_from_the_host(root, mount):
    assert agent_stamp(_details(root, mount), GUEST) == ""
    assert agent_stamp(_details(root, "/usr/local/lib/devsy-other", "/home"), GUEST) != ""


def test_no_stamp_through_a_symbolic_link_or_for_a_file_that_cannot_run(root, tmp_path):
    lib = root / "usr" / "local" / "lib"
    (tmp_path / "elsewhere").mkdir()
    shutil.move(str(lib / "devsy"), str(tmp_path / "elsewhere" / "devsy"))
    (lib / "devsy").symlink_to(tmp_path / "elsewhere" / "devsy")  # resolved on the host, not in the guest
    assert agent_stamp(_details(root), GUEST) == ""
    (lib / "devsy").unlink()
    shutil.move(str(tmp_path / "elsewhere" / "devsy"), str(lib / "devsy"))
    (root / GUEST.lstrip("/")).chmod(0o644)
    assert agent_stamp(_details(root), GUEST) == ""
    stopped = _details(root)
    stopped.status = InstanceStatus.STOPPED
    assert agent_stamp(stopped, GUEST) == ""
