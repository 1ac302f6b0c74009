"""Issue 11 faults of `devsy up`/`delete`/`exec` against the real Docker engine: nothing created for a refused up,
nothing lost by a failed one, create hooks rerun after a killed one, corrupt records deletable."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from helpers.cli import DEVSY, HOST_NET, DevsyCli, cli_env
from helpers.engine import containers_of
from helpers.projects import make_project
from devsy.workspace.paths import workspace_paths
from fixtures.fsmounts import fill, mounted_tmpfs

_DEADLINE_S = 120


def _created_containers(docker_client, workspace_id: str, since: datetime) -> list[dict]:
    """Every container-create event the engine saw for the workspace since `since` (independent of devsy)."""
    until = datetime.now(timezone.utc) + timedelta(seconds=1)
    events = docker_client.events(since=since, until=until, decode=True,
                                  filters={"type": "container", "event": "create",
                                           "label": f"dev.devsy.workspace={workspace_id}"})
    return list(events)


def _error(result) -> dict:
    assert result.returncode != 0, result.text
    assert "Traceback" not in result.text, result.text
    return result.json["error"]


# -- fault 5: the ssh config is checked before anything is created; one broken block blocks only its workspace ----
def test_up_refused_by_its_broken_ssh_block_creates_no_container(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                 tmp_path: Path, docker_client) -> None:
    devsy.ssh_config.parent.mkdir(parents=True)
    broken = f"# >>> devsy workspace {ws_id} >>>\nHost {ws_id}.devsy\n  User root\n"
    devsy.ssh_config.write_text(broken)
    since = datetime.now(timezone.utc) - timedelta(seconds=1)
    result = devsy.up(make_project(tmp_path / "p", {"image": guest_image}), "--id", ws_id, *HOST_NET, ok=False)
    assert "no end marker" in _error(result)["message"]
    assert _created_containers(docker_client, ws_id, since) == []
    assert devsy.ssh_config.read_text() == broken


def test_a_broken_block_of_another_workspace_does_not_block_up(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                               tmp_path: Path) -> None:
    devsy.ssh_config.parent.mkdir(parents=True)
    broken = "Host *\n  ServerAliveInterval 30\n# >>> devsy workspace someone-else >>>\nHost someone-else.devsy\n"
    devsy.ssh_config.write_text(broken)
    devsy.up(make_project(tmp_path / "p", {"image": guest_image}), "--id", ws_id, *HOST_NET)
    text = devsy.ssh_config.read_text()
    assert text.startswith(f"# >>> devsy workspace {ws_id} >>>\n") and text.endswith(broken)
    assert devsy.run("exec", ws_id, "true").returncode == 0
    assert devsy.run("delete", ws_id).returncode == 0
    assert devsy.ssh_config.read_text() == broken


def test_recreate_refused_by_a_broken_block_keeps_the_old_instance(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                   tmp_path: Path, docker_client) -> None:
    project = make_project(tmp_path / "p", {"image": guest_image})
    first = devsy.up(project, "--id", ws_id, *HOST_NET).json["workspace"]["instance"]["id"]
    text = devsy.ssh_config.read_text()
    devsy.ssh_config.write_text(text.replace(f"# <<< devsy workspace {ws_id} <<<\n", ""))
    result = devsy.up(project, "--id", ws_id, "--recreate", *HOST_NET, ok=False)
    assert "no end marker" in _error(result)["message"]
    assert [c.id for c in containers_of(docker_client, ws_id)] == [first]
    assert containers_of(docker_client, ws_id)[0].status == "running"


def test_a_failed_recreate_says_the_old_instance_was_replaced(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                              tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"image": guest_image})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    make_project(project, {"image": guest_image, "onCreateCommand": "exit 3"})
    error = _error(devsy.up(project, "--id", ws_id, "--recreate", *HOST_NET, ok=False))
    assert "had already been replaced" in error["message"], error
    assert f"--id {ws_id}" in error["hint"]
    status = devsy.run("status", ws_id, "--json")
    assert status.returncode == 0, status.text  # the record survived, so a plain `up` creates a new instance
    make_project(project, {"image": guest_image})
    devsy.up(project, "--id", ws_id, *HOST_NET)


# -- fault 3: an up killed during postCreateCommand ------------------------------------------------------------------
def test_an_up_killed_during_post_create_reruns_it_next_time(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                             tmp_path: Path) -> None:
    hook = f"echo run >> runs.log; {_BLOCK_UNTIL_RELEASED}"
    # waitFor postCreateCommand: the up waits for it (by default it would go on in the background after up).
    project = make_project(tmp_path / "p", {"image": guest_image, "onCreateCommand": "echo run >> on-create.log",
                                            "postCreateCommand": hook, "waitFor": "postCreateCommand"})
    _kill_up_when_signalled(devsy, ws_id, project)
    assert (project / "runs.log").read_text() == "run\n"
    (project / "release").touch()
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert (project / "runs.log").read_text() == "run\nrun\n"  # the unfinished create hook ran again
    assert (project / "on-create.log").read_text() == "run\n"  # the one that had completed did not
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert (project / "runs.log").read_text() == "run\nrun\n"  # and only until they had completed once


def test_an_up_killed_after_its_create_hooks_completed_does_not_rerun_them(devsy: DevsyCli, ws_id: str,
                                                                            guest_image: str, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"image": guest_image, "onCreateCommand": "echo run >> on-create.log",
                                            "postCreateCommand": "echo run >> post-create.log",
                                            "postStartCommand": _BLOCK_UNTIL_RELEASED})
    _kill_up_when_signalled(devsy, ws_id, project)  # in postStartCommand: every create hook is done
    (project / "release").touch()
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert (project / "on-create.log").read_text() == "run\n"
    assert (project / "post-create.log").read_text() == "run\n"


# A hook that tells the test it runs (through the project's FIFO), then blocks until the test creates `release`.
_BLOCK_UNTIL_RELEASED = "if [ ! -e release ]; then echo started > started.fifo; sleep infinity; fi"


def _kill_up_when_signalled(devsy: DevsyCli, ws_id: str, project: Path) -> None:
    """Start `devsy up`, wait (bounded) until a hook writes to the project's FIFO, then SIGKILL the whole CLI."""
    started = project / "started.fifo"
    os.mkfifo(started)
    # O_RDWR: the hook's write never blocks on a missing reader, and select sees only real data, never EOF.
    signal_fd = os.open(started, os.O_RDWR | os.O_NONBLOCK)
    proc = subprocess.Popen([*DEVSY, "up", str(project), "--id", ws_id, *HOST_NET], env=cli_env(devsy),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        ready, _, _ = select.select([signal_fd], [], [], _DEADLINE_S)
        assert ready, f"the blocking hook did not start within {_DEADLINE_S}s"
        os.killpg(proc.pid, signal.SIGKILL)  # the whole CLI, mid-hook
        proc.wait(timeout=30)
    finally:
        os.close(signal_fd)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        proc.stderr.close()


# -- fault 6: remoteUser, removed content folder --------------------------------------------------------------------
def test_a_remote_user_missing_from_the_image_is_refused_and_nothing_is_left(
        devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path, docker_client) -> None:
    project = make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "no-such-user"})
    error = _error(devsy.up(project, "--id", ws_id, *HOST_NET, ok=False))
    assert error["type"] == "config"
    assert "'no-such-user'" in error["message"] and guest_image in error["message"]
    assert containers_of(docker_client, ws_id) == []
    assert not workspace_paths(devsy.home, ws_id).root.exists()


def test_a_removed_content_folder_is_explained_before_exec(devsy: DevsyCli, ws_id: str, guest_image: str) -> None:
    devsy.up(guest_image, "--id", ws_id, *HOST_NET)
    shutil.rmtree(workspace_paths(devsy.home, ws_id).content)
    result = devsy.run("exec", ws_id, "--", "true")
    stderr = result.stderr.decode()
    assert result.returncode == 1 and "Traceback" not in stderr and "breakout" not in stderr, stderr
    assert "content folder" in stderr and "was removed" in stderr, stderr
    assert f"--id {ws_id} --recreate" in stderr and f"devsy delete {ws_id}" in stderr
    # A plain `up` would make a new folder the running instance cannot see: it says to recreate, and leaves none.
    error = _error(devsy.up(guest_image, "--id", ws_id, *HOST_NET, ok=False))
    assert "was removed" in error["message"] and "--recreate" in error["hint"]
    assert not workspace_paths(devsy.home, ws_id).content.exists()
    devsy.up(guest_image, "--id", ws_id, "--recreate", *HOST_NET)
    assert devsy.run("exec", ws_id, "--", "true").returncode == 0


# -- fault 4 and 1: delete of a corrupt record, and on a full disk ----------------------------------------------------
def test_delete_of_a_corrupt_record_removes_everything(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                       docker_client) -> None:
    devsy.up(guest_image, "--id", ws_id, *HOST_NET)
    paths = workspace_paths(devsy.home, ws_id)
    paths.record.write_text('{"id": "' + ws_id + '", "provider": "docker", trunc')
    assert _error(devsy.run("status", ws_id, "--json"))["type"] == "workspace-corrupt"
    result = devsy.run("delete", ws_id, "--json")
    assert result.returncode == 0, result.text
    assert containers_of(docker_client, ws_id) == []
    assert f"devsy workspace {ws_id}" not in devsy.ssh_config.read_text()
    assert not paths.root.exists() and not paths.lock.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_delete_works_on_a_full_devsy_home(devsy: DevsyCli, ws_id: str, guest_image: str, docker_client) -> None:
    with mounted_tmpfs(devsy.home, size="1m"):
        devsy.up(guest_image, "--id", ws_id, *HOST_NET)
        fill(devsy.home)
        before = [c.id for c in containers_of(docker_client, ws_id)]
        error = _error(devsy.up(guest_image, "--id", ws_id, "--recreate", *HOST_NET, ok=False))
        assert "No space left on device" in error["message"]
        assert [c.id for c in containers_of(docker_client, ws_id)] == before  # checked before replacing it
        result = devsy.run("delete", ws_id, "--json")
        assert result.returncode == 0, result.text
        assert containers_of(docker_client, ws_id) == []
        assert not workspace_paths(devsy.home, ws_id).root.exists()
