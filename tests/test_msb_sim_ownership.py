"""The msb simulator presents a `--mount-dir`'s owner as msb does (fixtures/msb_sim/views.py: a bindfs view): through
the real `devsy` CLI on the simulated MicroSandbox, a non-root remoteUser owns and writes its workspace, what it
writes reaches the host as the host user running the stand-in, and the view is mounted exactly while the sandbox's
container runs (stop unmounts, start remounts, delete leaves no FUSE mount). Simulated: never MicroSandbox evidence.

Guest-side facts are observed with `docker exec` in the sandbox's container, host-side facts with os.stat and
/proc/self/mountinfo; devsy is only the thing under test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from devsy.bounded_wait import poll_until
from devsy.driver.microsandbox.naming import sandbox_name
from devsy.process_tree import start_time, stop_pid
from fixtures.msb_sim.docker import container_name, container_state, sweep
from fixtures.msb_sim.state import home_key
from fixtures.msb_sim.views import views_root
from helpers.cli import DevsyCli
from helpers.projects import make_project
from test_msb_sim_driver import SIM, sim_home  # noqa: F401 - sim_home is a fixture

pytestmark = pytest.mark.docker
DEADLINE_S = 180.0
DEV = (1000, 1000)  # `dev` in the guest image's /etc/passwd and /etc/group
FOREIGN_OWNER = (10001, 10002)  # a host owner no guest account has
HOST_USER = (os.geteuid(), os.getegid())  # who runs the stand-in: what a guest write is owned by on the host


def _fuse_mounts_under(folder: Path) -> list[str]:
    """FUSE mount points at or below `folder`, read from /proc/self/mountinfo (this test's own observation)."""
    base = os.path.realpath(folder).rstrip("/") + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[fields.index("-") + 1].startswith("fuse") and (fields[4] + "/").startswith(base):
            points.append(fields[4])
    return points


def _guest(ws: str, script: str, user: str = "dev") -> str:
    """A script in the sandbox's container, run by Docker as `user` (an observation independent of devsy and msb)."""
    done = subprocess.run(["docker", "exec", "--user", user, container_name(sandbox_name(ws)), "/bin/sh", "-c", script],
                          capture_output=True, text=True, timeout=DEADLINE_S)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _owner(path: Path) -> tuple[int, int]:
    stat = path.lstat()
    return stat.st_uid, stat.st_gid


def _up(devsy: DevsyCli, project: Path, ws: str) -> dict:
    devsy.created.add(ws)
    result = devsy.run("up", str(project), "--id", ws, "--provider", "microsandbox", "--json", timeout=DEADLINE_S)
    assert result.returncode == 0, result.text
    return result.json["workspace"]


def _devsy_ok(devsy: DevsyCli, *args: str) -> str:
    result = devsy.run(*args, timeout=DEADLINE_S)
    assert result.returncode == 0, result.text
    return result.stdout.decode()


def _project(tmp_path: Path, guest_image: str) -> Path:
    project = make_project(tmp_path / "project", {"image": guest_image, "remoteUser": "dev"})
    project.chmod(0o755)  # as a checkout is: only its host owner (root here, or the test's user) may write it
    return project


def test_a_non_root_developer_owns_and_writes_its_workspace(sim_home: Path, devsy: DevsyCli, guest_image: str,
                                                            tmp_path: Path) -> None:
    project = _project(tmp_path, guest_image)
    host_file = project / "from-host"
    host_file.write_text("host\n")
    host_file.chmod(0o644)
    if os.geteuid() == 0:
        os.chown(host_file, *FOREIGN_OWNER)
    host_owner = _owner(host_file)
    ws = "simown"
    folder = _up(devsy, project, ws)["workspace_folder"]

    inspected = json.loads(subprocess.run([SIM, "inspect", sandbox_name(ws), "--format", "json"], capture_output=True,
                                          text=True, check=True, timeout=DEADLINE_S).stdout)
    (mount,) = [m for m in inspected["config"]["mounts"] if m["guest"] == folder]
    assert (mount["options"]["override_uid"], mount["options"]["override_gid"]) == DEV

    script = (f"umask 022; echo one > {folder}/by-dev && echo two >> {folder}/by-dev && "
              f"echo edited >> {folder}/from-host && mkdir {folder}/dir-by-dev && echo ok")
    written = devsy.run("exec", ws, "--", "/bin/sh", "-c", script, timeout=DEADLINE_S)
    assert (written.returncode, written.stdout) == (0, b"ok\n"), written.text
    seen = _guest(ws, f"id -u; stat -c '%u:%g %a %n' {folder} {folder}/by-dev {folder}/dir-by-dev {folder}/from-host")
    assert seen.splitlines() == ["1000", f"1000:1000 755 {folder}", f"1000:1000 644 {folder}/by-dev",
                                 f"1000:1000 755 {folder}/dir-by-dev", f"1000:1000 644 {folder}/from-host"]
    assert (project / "by-dev").read_text() == "one\ntwo\n"
    assert host_file.read_text() == "host\nedited\n"
    assert _owner(project / "by-dev") == HOST_USER and _owner(project / "dir-by-dev") == HOST_USER
    assert _owner(host_file) == host_owner, "the guest's edit changed the host owner"
    assert _fuse_mounts_under(views_root(sim_home)), "no view of the workspace is mounted while the sandbox runs"

    _devsy_ok(devsy, "delete", ws, "--json")
    assert _fuse_mounts_under(views_root(sim_home)) == [], "delete left the workspace view mounted"
    assert container_state(sandbox_name(ws)) is None, "delete left the sandbox's container"
    assert (project / "by-dev").read_text() == "one\ntwo\n", "delete touched the workspace folder"


def test_stop_unmounts_the_view_and_start_remounts_it(sim_home: Path, devsy: DevsyCli, guest_image: str,
                                                      tmp_path: Path) -> None:
    project = _project(tmp_path, guest_image)
    ws = "simstop"
    folder = _up(devsy, project, ws)["workspace_folder"]
    _devsy_ok(devsy, "exec", ws, "--", "/bin/sh", "-c", f"echo kept > {folder}/note")
    assert _fuse_mounts_under(views_root(sim_home))

    _devsy_ok(devsy, "stop", ws, "--json")
    state = container_state(sandbox_name(ws))
    assert state is not None and not state["Running"]
    assert _fuse_mounts_under(views_root(sim_home)) == [], "stop left the workspace view mounted"

    _devsy_ok(devsy, "start", ws, "--json")
    assert len(_fuse_mounts_under(views_root(sim_home))) == 1, "start did not mount the workspace view again"
    assert _guest(ws, f"stat -c '%u:%g' {folder}/note; cat {folder}/note") == "1000:1000\nkept\n"
    _devsy_ok(devsy, "exec", ws, "--", "/bin/sh", "-c", f"echo again >> {folder}/note")
    assert (project / "note").read_text() == "kept\nagain\n"
    _devsy_ok(devsy, "delete", ws, "--json")
    assert _fuse_mounts_under(views_root(sim_home)) == []


# -- the stand-in alone (a busybox rootfs: no devsy needed) ------------------------------------------------------

def _sim(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SIM, *args], capture_output=True, text=True, timeout=DEADLINE_S,
                          env={**os.environ, **(env or {})})


def _create(folder: Path, rootfs: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return _sim("create", "--name", "sb", "--pull", "never", "--mount-dir", f"{folder}:/w:rw,uid=1000,gid=1000",
                str(rootfs), env=env)


def test_without_bindfs_the_stand_in_refuses_the_owner_and_creates_nothing(sim_home: Path, busybox_rootfs: Path,
                                                                           tmp_path: Path) -> None:
    bare = tmp_path / "bin"  # a PATH with Docker only
    bare.mkdir()
    docker = subprocess.run(["sh", "-c", "command -v docker"], capture_output=True, text=True, check=True).stdout
    (bare / "docker").symlink_to(docker.strip())
    folder = tmp_path / "w"
    folder.mkdir()
    refused = _create(folder, busybox_rootfs, env={"PATH": str(bare)})
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: the msb simulator (a stand-in) needs bindfs to present the owner msb "
                                     "shows for a --mount-dir (uid=,gid=; root:root without them), and bindfs is "
                                     "not installed\n"), refused.stderr
    assert _sim("ls", "-q").stdout == "" and container_state("sb") is None
    assert _fuse_mounts_under(views_root(sim_home)) == []


def test_rm_force_unmounts_a_running_sandboxs_view(sim_home: Path, busybox_rootfs: Path, tmp_path: Path) -> None:
    folder = tmp_path / "w"
    folder.mkdir()
    assert _create(folder, busybox_rootfs).returncode == 0
    assert len(_fuse_mounts_under(views_root(sim_home))) == 1
    removed = _sim("rm", "--force", "sb")
    assert removed.returncode == 0, removed.stderr
    assert _fuse_mounts_under(views_root(sim_home)) == [] and container_state("sb") is None
    assert not (views_root(sim_home) / "sb").exists(), "rm left the sandbox's views folder"


def test_rm_of_a_sandbox_whose_view_is_already_gone_and_sweep_of_a_leaked_one(sim_home: Path, busybox_rootfs: Path,
                                                                             tmp_path: Path) -> None:
    folder = tmp_path / "w"
    folder.mkdir()
    assert _create(folder, busybox_rootfs).returncode == 0
    (view,) = _fuse_mounts_under(views_root(sim_home))
    subprocess.run(["fusermount", "-u", view], check=True, timeout=DEADLINE_S)  # gone behind the stand-in's back
    removed = _sim("rm", "--force", "sb")
    assert removed.returncode == 0, removed.stderr
    assert _sim("ls", "-q").stdout == "" and container_state("sb") is None

    assert _create(folder, busybox_rootfs).returncode == 0  # then one that only a sweep can clean (a crash)
    (view,) = _fuse_mounts_under(views_root(sim_home))
    assert f"view {view}" in sweep(home_key(sim_home))
    assert _fuse_mounts_under(views_root(sim_home)) == [] and container_state("sb") is None
    assert not views_root(sim_home).exists(), "the sweep left the views' folders (they are outside MSB_HOME)"


def _bindfs_serving(view: str) -> int:
    """The pid of the bindfs daemon serving `view` (started by this test's stand-in), found in /proc."""
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if argv and argv[0].endswith(b"bindfs") and argv[-1].decode(errors="replace") == view:
            return int(entry.name)
    raise AssertionError(f"no bindfs serves {view}")


def test_start_replaces_a_view_whose_bindfs_died(sim_home: Path, busybox_rootfs: Path, tmp_path: Path) -> None:
    """A workload that ended by itself leaves its view mounted; if bindfs then dies the mount is dead (ENOTCONN), and
    the next start must mount a fresh view rather than bind the dead one."""
    folder = tmp_path / "w"
    folder.mkdir()
    workload = "test -e /w/stay || exit 0; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"
    ran = _sim("run", "--detach", "--name", "sb", "--pull", "never", "--mount-dir",
               f"{folder}:/w:rw,uid=1000,gid=1000", str(busybox_rootfs), "--", "/bin/sh", "-c", workload)
    assert ran.returncode == 0, ran.stderr
    poll_until(lambda: container_state("sb"), lambda state: state is not None and not state["Running"],
               timeout=DEADLINE_S, interval=0.2, what="the workload without /w/stay exiting")
    (view,) = _fuse_mounts_under(views_root(sim_home))
    pid = _bindfs_serving(view)
    assert stop_pid(pid, start_time(pid), group=False, grace=0).ended
    with pytest.raises(OSError, match="Transport endpoint is not connected"):
        os.stat(view)
    (folder / "stay").write_text("here\n")

    started = _sim("start", "sb")
    assert started.returncode == 0, started.stderr
    assert container_state("sb")["Running"]
    done = subprocess.run(["docker", "exec", container_name("sb"), "/bin/busybox", "stat", "-c", "%u:%g", "/w/stay"],
                          capture_output=True, text=True, timeout=DEADLINE_S)
    assert (done.returncode, done.stdout) == (0, "1000:1000\n"), done.stderr
    assert _sim("rm", "--force", "sb").returncode == 0
    assert _fuse_mounts_under(views_root(sim_home)) == []


def test_deleting_the_msb_home_of_a_running_sandbox_leaves_the_host_folder_alone(sim_home: Path, busybox_rootfs: Path,
                                                                                 tmp_path: Path) -> None:
    """Every test's cleanup (and the harness's) deletes its MSB_HOME with rmtree: with a view inside it, rmtree went
    through the live bindfs mount and deleted the files of the folder the sandbox mounts."""
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "precious").write_text("keep\n")
    assert _create(folder, busybox_rootfs).returncode == 0
    assert len(_fuse_mounts_under(views_root(sim_home))) == 1
    shutil.rmtree(sim_home, ignore_errors=True)
    sim_home.mkdir(exist_ok=True)  # the fixture's cleanup runs in it
    assert (folder / "precious").read_text() == "keep\n", "deleting MSB_HOME deleted the mounted folder's files"
