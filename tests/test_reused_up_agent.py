"""A reused `devsy up` proves from the host that the agent is in place and then runs nothing in the guest; each
thing that breaks the proof (the agent removed or changed in the guest, its python3 removed, another agent on the
host, another instance, a mount the host view does not show) makes it check in the guest again. Observed on the
real engine: its exec_create events."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import zipfile

import pytest

from helpers.cli import HOST_NET
from helpers.projects import make_project
from devsy.agent.artifact import resolve_artifact
from devsy.agent.build import build_agent
from devsy.agent.delivery import guest_agent_path
from devsy.agent.host_view import host_stamp, host_stamps, instance_identity, still_in_place
from devsy.agent.install import agent_in_place
from devsy.agent.note import AgentNote, write_note
from devsy.agent.guest.stamps import guest_stamps, search_path_dirs
from devsy.driver.base import ContainerDetails, InstanceStatus
from devsy.workspace.paths import workspace_paths


def _container(docker_client, workspace: str):
    return docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={workspace}"})[0]


def _sh(container, script: str) -> str:
    result = container.exec_run(["sh", "-c", script], user="0")
    assert result.exit_code == 0, result.output
    return result.output.decode().strip()


def _up_counting_execs(devsy, project, ws_id, docker_client, extra_args: tuple[str, ...] = (), **kw) -> int:
    """Run a reused `devsy up`; how many execs the engine created in the workspace's container meanwhile."""
    started = time.time_ns()
    devsy.up(project, "--id", ws_id, *extra_args, **kw)
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
    # The host saw the change: straight to the check, the transfer and the setup (no one-exec attempt first).
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client) == 3
    assert _sh(container, f"sha256sum {guest_agent_path(agent_sha)} | cut -d' ' -f1") == agent_sha


def test_an_agent_changed_in_the_guest_is_delivered_again(devsy, ws_id, workspace, docker_client, agent_sha):
    container = _container(docker_client, ws_id)
    path = guest_agent_path(agent_sha)
    size = _sh(container, f"stat -c %s {path}")
    # Same size and modification time, other bytes: the inode and change time give it away.
    _sh(container, f"head -c {size} /dev/zero > {path}.new && chmod 755 {path}.new && touch -r {path} {path}.new"
                   f" && mv -f {path}.new {path}")
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


def test_python3_removed_in_the_guest_is_noticed(devsy, ws_id, workspace, docker_client):
    _sh(_container(docker_client, ws_id), "rm -f /usr/bin/python3*")
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client) > 0
    assert devsy.run("status", ws_id, "--json").json["workspace"]["ssh_path"] == "exec"


def test_a_recreated_instance_is_checked_in_the_guest(devsy, ws_id, workspace, docker_client):
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client, extra_args=("--recreate",)) > 0
    assert _up_counting_execs(devsy, workspace, ws_id, docker_client) == 0  # the recreating up noted the new one


def test_an_agent_under_a_mount_is_always_checked_in_the_guest(devsy, ws_id, guest_image, tmp_path, docker_client):
    # The guest sees the tmpfs (where the agent is delivered); the host's view of the root does not: no proof.
    project = make_project(tmp_path / "mounted", {"image": guest_image,
                                                  "mounts": ["type=tmpfs,target=/usr/local/lib/devsy"]})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert _up_counting_execs(devsy, project, ws_id, docker_client) > 0
    assert devsy.run("ssh", ws_id, "--command", "true").returncode == 0


# A driver without a host view (devsy-provider-docker behind the protocol; MicroSandbox): a reused up checks in the
# guest, the presence check and `agent setup` in one exec, with the architecture noted by the earlier up.

EXTERNAL = ("--provider", "external-docker", *HOST_NET)


@pytest.fixture
def external_workspace(devsy, ws_id, guest_image, tmp_path):
    project = make_project(tmp_path / "project", {"image": guest_image})
    devsy.up(project, "--id", ws_id, *EXTERNAL)
    return project


def test_without_a_host_view_a_reused_up_checks_and_sets_up_in_one_exec(devsy, ws_id, external_workspace,
                                                                          docker_client):
    assert _up_counting_execs(devsy, external_workspace, ws_id, docker_client) == 1
    result = devsy.run("ssh", ws_id, "--command", "echo in-guest")
    assert (result.returncode, result.stdout) == (0, b"in-guest\n"), result.text


@pytest.mark.parametrize("change", ["removed", "changed"])
def test_without_a_host_view_an_agent_removed_or_changed_is_delivered_again(devsy, ws_id, external_workspace,
                                                                           docker_client, agent_sha, change):
    container = _container(docker_client, ws_id)
    path = guest_agent_path(agent_sha)
    _sh(container, f"rm -f {path}" if change == "removed" else f"printf x >> {path}")
    # The one-exec attempt, then the check, the transfer and the setup.
    assert _up_counting_execs(devsy, external_workspace, ws_id, docker_client) == 4
    assert _sh(container, f"sha256sum {path} | cut -d' ' -f1") == agent_sha
    assert _up_counting_execs(devsy, external_workspace, ws_id, docker_client) == 1


def test_without_a_host_view_python3_removed_is_noticed(devsy, ws_id, external_workspace, docker_client):
    _sh(_container(docker_client, ws_id), "rm -f /usr/bin/python3*")
    assert _up_counting_execs(devsy, external_workspace, ws_id, docker_client) > 1
    assert devsy.run("status", ws_id, "--json").json["workspace"]["ssh_path"] == "exec"


# The host view itself, on a folder standing in for an instance's root (no engine needed to check these rules).

GUEST = "/usr/local/lib/devsy/agent-x.pyz"


def _details(root, instance_id: str = "c1") -> ContainerDetails:
    return ContainerDetails(id=instance_id, created_at="t", status=InstanceStatus.RUNNING, host_root=str(root))


@pytest.fixture
def root(tmp_path):
    agent = tmp_path / "root" / GUEST.lstrip("/")
    agent.parent.mkdir(parents=True)
    agent.write_bytes(b"agent")
    agent.chmod(0o755)
    return tmp_path / "root"


def _as_guest_sees(root, path: str) -> dict[str, str]:
    """The stamps `agent setup` would report, for a guest whose root is `root` (same files, seen directly)."""
    stamps = guest_stamps([str(root) + path])
    return {key[len(str(root)):]: value for key, value in stamps.items()}


def test_the_guest_and_the_host_see_the_same_stamp_until_the_file_changes(root):
    recorded = host_stamps(_details(root), _as_guest_sees(root, GUEST))
    assert list(recorded) == [GUEST]
    (root / GUEST.lstrip("/")).write_bytes(b"other bytes")  # another size: no timestamp granularity involved
    assert host_stamp(_details(root), GUEST) not in ("", recorded[GUEST])


def test_every_link_from_the_interpreters_name_is_stamped(root, tmp_path):
    # /usr/bin/python3 -> /etc/alternatives/python3 -> /usr/bin/python3.9, as on RHEL: retargeting the middle link
    # (alternatives --set) changes what python3 starts, and a stamp.
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "etc" / "alternatives").mkdir(parents=True)
    for version in ("3.9", "3.11"):
        (root / "usr" / "bin" / f"python{version}").write_bytes(b"interpreter " + version.encode())
    (root / "etc" / "alternatives" / "python3").symlink_to("../../usr/bin/python3.9")  # relative: stays in root
    (root / "usr" / "bin" / "python3").symlink_to("../../etc/alternatives/python3")
    seen = {key[len(str(root)):]: value for key, value in guest_stamps([str(root / "usr/bin/python3")]).items()}
    assert set(seen) == {"/usr/bin/python3", "/etc/alternatives/python3", "/usr/bin/python3.9"}
    recorded = host_stamps(_details(root), seen)
    assert recorded == seen
    middle = root / "etc" / "alternatives" / "python3"
    middle.unlink()
    middle.symlink_to("../../usr/bin/python3.11")
    assert not still_in_place(_details(root), recorded)


def test_a_program_added_earlier_in_the_search_path_changes_a_stamp(root, monkeypatch):
    early, late = root / "usr" / "local" / "bin", root / "usr" / "bin"
    early.mkdir(parents=True)
    late.mkdir(parents=True)
    (late / "python3").write_bytes(b"interpreter")
    (late / "python3").chmod(0o755)
    os.utime(early, ns=(10**18, 10**18))  # an old time, so that the entry added below moves it whatever the clock
    monkeypatch.setenv("PATH", f"{early}:{late}:{root / 'never-read'}")
    assert search_path_dirs("python3") == [str(early), str(late)]
    recorded = host_stamps(_details(root), {key[len(str(root)):]: value
                                            for key, value in guest_stamps(search_path_dirs("python3")).items()})
    assert set(recorded) == {"/usr/local/bin", "/usr/bin"}
    (early / "python3").write_bytes(b"another interpreter, found first")
    assert not still_in_place(_details(root), recorded)


def test_nothing_is_recorded_where_the_guest_sees_another_file(root, tmp_path):
    # As with a mount over the folder: the guest's file is not the one in the host's view of the root.
    elsewhere = tmp_path / "mounted" / GUEST.lstrip("/")
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_bytes(b"agent")
    assert host_stamps(_details(root), _as_guest_sees(tmp_path / "mounted", GUEST)) == {}


def test_no_stamp_through_a_symbolic_link_however_long_the_chain(root, tmp_path):
    lib = root / "usr" / "local" / "lib"
    (lib / "devsy").rename(tmp_path / "real-devsy")
    (lib / "devsy").symlink_to(tmp_path / "real-devsy")  # would be resolved on the host, not in the guest
    assert host_stamp(_details(root), GUEST) == ""
    (lib / "devsy").unlink()
    previous = "real-devsy-target"
    (lib / previous).symlink_to(tmp_path / "real-devsy")
    for n in range(1500):  # deeper than Python's recursion limit, were links followed by recursion
        (lib / f"l{n}").symlink_to(previous)
        previous = f"l{n}"
    (lib / "devsy").symlink_to(previous)
    assert host_stamp(_details(root), GUEST) == ""


def test_no_stamp_without_a_view(root):
    stopped = _details(root)
    stopped.status = InstanceStatus.STOPPED
    assert host_stamp(stopped, GUEST) == ""
    assert host_stamp(ContainerDetails(id="c1", created_at="t", status=InstanceStatus.RUNNING), GUEST) == ""
    assert host_stamp(_details(root), "/usr/local/lib/../lib/devsy/agent-x.pyz") == ""


def test_the_proof_holds_only_for_the_instance_it_was_made_in(root, tmp_path, agent_sha):
    paths = workspace_paths(tmp_path / "home", "ws")
    path = "/usr/local/lib/devsy/agent-real.pyz"
    (root / path.lstrip("/")).write_bytes(b"agent")
    details = _details(root)
    note = AgentNote(guest_path=path, sha256=agent_sha, arch=build_agent().arch, instance=instance_identity(details),
                     stamps=host_stamps(details, _as_guest_sees(root, path)))
    write_note(paths, note)
    assert agent_in_place(paths, details)
    assert not agent_in_place(paths, _details(root, instance_id="c2"))
    write_note(paths, AgentNote(**{**note.__dict__, "sha256": "0" * 64}))  # this devsy carries another agent
    assert not agent_in_place(paths, details)
