"""waitFor through the real CLI on the real engine: `devsy up` returns once the waitFor hook (default
updateContentCommand) has finished, the later hooks go on in a background process, and every command that changes
the instance ends that process first. Observed in the container (docker exec) and on the host (the hooks' log, the
process), never through devsy's internals."""

from __future__ import annotations

import json
import os
import select
from pathlib import Path

from devsy.bounded_wait import poll_until
from devsy.process_tree import pin_started
from fixtures.process_observer import ProcessObserver
from helpers.cli import HOST_NET, DevsyCli
from helpers.engine import containers_of
from helpers.projects import make_project

_DEADLINE_S = 120.0
_NONCE = "background-hook-3d9e"
SECRET = "bg-hook-secret-51c7a2"
# The hook tells the test it started (its pid through the project's FIFO), then waits, bounded, for `release`.
_BLOCKS = (f"DEVSY_NONCE={_NONCE} sleep 600 & echo $! > started.fifo; "
           "i=0; while [ ! -e release ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done; kill $!")


def _log(name: str) -> str:
    return f"echo {name} >> order.log"


class _Fifo:
    """The project's started.fifo, read without blocking a writer and with a deadline."""

    def __init__(self, project: Path) -> None:
        path = project / "started.fifo"
        os.mkfifo(path)
        self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # O_RDWR: select sees only real data, never EOF

    def read_pid(self) -> int:
        ready, _, _ = select.select([self._fd], [], [], _DEADLINE_S)
        assert ready, f"the background hook did not start within {_DEADLINE_S} s"
        return int(os.read(self._fd, 64).split()[0])

    def close(self) -> None:
        os.close(self._fd)


def _up_until_the_hook_started(devsy: DevsyCli, project: Path, ws_id: str) -> int:
    """`devsy up` of a project whose background hook runs _BLOCKS; returns once that hook started (its guest pid)."""
    fifo = _Fifo(project)
    try:
        devsy.up(project, "--id", ws_id, *HOST_NET)
        return fifo.read_pid()
    finally:
        fifo.close()


def _state_file(devsy: DevsyCli, ws_id: str) -> dict:
    return json.loads((devsy.home / "workspaces" / ws_id / "hooks.json").read_text())


def _background(devsy: DevsyCli, ws_id: str) -> dict | None:
    status = devsy.run("status", ws_id, "--json")
    assert status.returncode == 0, status.text
    return status.json["workspace"]["background_hooks"]


def _host_process_alive(state: dict) -> bool:
    """Still running (an exited process whose zombie the machine's init has not reaped yet counts as gone)."""
    pinned = pin_started(state["pid"], state["start_time"])
    if pinned is None:
        return False
    with pinned:
        return not pinned.exited()


def test_up_returns_at_wait_for_and_the_later_hooks_finish_in_the_background(devsy, ws_id, guest_image, tmp_path,
                                                                             docker_client):
    project = make_project(tmp_path / "p", {
        "image": guest_image, "containerEnv": {"TOKEN": SECRET},
        "onCreateCommand": _log("onCreate"), "updateContentCommand": _log("updateContent"),
        "postCreateCommand": f"echo token=$TOKEN; {_BLOCKS}; {_log('postCreate')}",
        "postStartCommand": _log("postStart"), "postAttachCommand": {"x": _log("postAttach")},
    })
    fifo = _Fifo(project)
    try:
        up = devsy.up(project, "--id", ws_id, *HOST_NET)  # returns although postCreateCommand cannot finish yet
        assert up.json["workspace"]["background_hooks"]["hooks"] == [
            "postCreateCommand", "postStartCommand", "postAttachCommand"]
        guest_pid = fifo.read_pid()
    finally:
        fifo.close()
    (container,) = containers_of(docker_client, ws_id)
    ProcessObserver.via_docker(container.id).identify(guest_pid, _NONCE)  # the hook runs now, after up returned
    assert (project / "order.log").read_text().split() == ["onCreate", "updateContent"]
    running = _background(devsy, ws_id)
    assert (running["state"], running["running"]) == ("running", "postCreateCommand"), running
    # A session is not delayed by the hooks still running.
    session = devsy.run("exec", ws_id, "--", "cat", "order.log")
    assert (session.returncode, session.stdout) == (0, b"onCreate\nupdateContent\n"), session.text

    (project / "release").touch()
    log = devsy.wait_hooks(ws_id)
    assert (project / "order.log").read_text().split() == [
        "onCreate", "updateContent", "postCreate", "postStart", "postAttach"]
    assert b"token=***" in log.stdout and b"running postAttachCommand:x" in log.stdout, log.text
    ended = _background(devsy, ws_id)
    assert (ended["state"], ended["done"]) == ("finished", [
        "postCreateCommand", "postStartCommand", "postAttachCommand"]), ended
    assert not _host_process_alive(_state_file(devsy, ws_id))
    for name in ("hooks.log", "hooks.json", "workspace.json"):
        assert SECRET.encode() not in (devsy.home / "workspaces" / ws_id / name).read_bytes(), name
    # A second up of the running instance: its create hooks are done, so only postAttachCommand runs.
    devsy.up(project, "--id", ws_id)
    devsy.wait_hooks(ws_id)
    assert (project / "order.log").read_text().split()[5:] == ["postAttach"]


def test_a_background_failure_is_reported_and_the_next_up_runs_that_hook_again(devsy, ws_id, guest_image,
                                                                               tmp_path):
    project = make_project(tmp_path / "p", {
        "image": guest_image, "containerEnv": {"TOKEN": SECRET},
        "onCreateCommand": _log("onCreate"),
        "postCreateCommand": f"{_log('postCreate')}; echo broke-with-$TOKEN; test -e fixed",
    })
    up = devsy.up(project, "--id", ws_id, *HOST_NET)
    assert up.json["outcome"] == "success"  # the failure comes after waitFor: up had returned
    failed = devsy.run("logs", ws_id, "--hooks", "--follow")
    assert failed.returncode == 1, failed.text
    assert b"broke-with-***" in failed.stdout and SECRET.encode() not in failed.stdout + failed.stderr
    state = _background(devsy, ws_id)
    assert state["state"] == "failed" and "postCreateCommand failed with exit code 1" in state["error"], state
    assert "broke-with-***" in state["error"] and SECRET not in json.dumps(state)
    human = devsy.run("status", ws_id)
    assert b"failed: postCreateCommand failed with exit code 1" in human.stdout, human.text

    (project / "fixed").touch()
    devsy.up(project, "--id", ws_id)
    devsy.wait_hooks(ws_id)
    assert (project / "order.log").read_text().split() == ["onCreate", "postCreate", "postCreate"]
    assert _background(devsy, ws_id)["state"] == "finished"


def test_up_and_delete_end_a_running_continuation_and_its_guest_command(devsy, ws_id, guest_image, tmp_path,
                                                                        docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image, "postCreateCommand": _BLOCKS})
    fifo = _Fifo(project)
    try:
        devsy.up(project, "--id", ws_id, *HOST_NET)
        (container,) = containers_of(docker_client, ws_id)
        observer = ProcessObserver.via_docker(container.id)
        guest = observer.identify(fifo.read_pid(), _NONCE)
        continuation = _state_file(devsy, ws_id)
        assert _host_process_alive(continuation)

        again = devsy.up(project, "--id", ws_id)  # ends it (postCreate unfinished), then starts it again
        assert b"stopping the background hooks (running postCreateCommand)" in again.stderr, again.text
        assert observer.wait_dead([guest], timeout=30) == [], "the ended hook's guest command is still running"
        assert not _host_process_alive(continuation)
        rerun = observer.identify(fifo.read_pid(), _NONCE)  # the unfinished create hook runs again
        second = _state_file(devsy, ws_id)
        assert second["pid"] != continuation["pid"] and _host_process_alive(second)
    finally:
        fifo.close()
    deleted = devsy.run("delete", ws_id)
    assert deleted.returncode == 0, deleted.text
    assert not _host_process_alive(second)
    assert containers_of(docker_client, ws_id) == []  # and with it the guest command
    del rerun


def test_stop_ends_the_continuation_and_says_so_in_status(devsy, ws_id, guest_image, tmp_path):
    project = make_project(tmp_path / "p", {"image": guest_image, "postCreateCommand": _BLOCKS})
    _up_until_the_hook_started(devsy, project, ws_id)
    continuation = _state_file(devsy, ws_id)
    stopped = devsy.run("stop", ws_id)
    assert stopped.returncode == 0 and b"stopping the background hooks" in stopped.stderr, stopped.text
    assert not _host_process_alive(continuation)
    assert _background(devsy, ws_id)["state"] == "stopped"
    follow = devsy.run("logs", ws_id, "--hooks", "--follow")
    assert follow.returncode == 2 and b"stopped" in follow.stderr, follow.text


def test_wait_all_hooks_and_wait_for_post_attach_leave_nothing_to_the_background(devsy, ws_id, guest_image,
                                                                                tmp_path):
    hooks = {"postCreateCommand": _log("postCreate"), "postStartCommand": _log("postStart"),
             "postAttachCommand": _log("postAttach")}
    project = make_project(tmp_path / "p", {"image": guest_image, **hooks})
    up = devsy.up(project, "--id", ws_id, "--wait-all-hooks", *HOST_NET)
    assert up.json["workspace"]["background_hooks"] is None
    assert (project / "order.log").read_text().split() == ["postCreate", "postStart", "postAttach"]
    assert _background(devsy, ws_id) is None
    assert not (devsy.home / "workspaces" / ws_id / "hooks.log").exists()

    make_project(project, {"image": guest_image, **hooks, "waitFor": "postAttachCommand"})
    devsy.up(project, "--id", ws_id)
    assert (project / "order.log").read_text().split()[3:] == ["postAttach"]
    assert _background(devsy, ws_id) is None


def test_wait_for_on_create_defers_update_content_and_marks_the_create_hooks_done(devsy, ws_id, guest_image,
                                                                                  tmp_path):
    # No postCreateCommand: its (empty) turn must still be marked, or the next up would run updateContent again.
    project = make_project(tmp_path / "p", {"image": guest_image, "waitFor": "onCreateCommand",
                                            "onCreateCommand": _log("onCreate"),
                                            "updateContentCommand": _log("updateContent")})
    up = devsy.up(project, "--id", ws_id, *HOST_NET)
    assert up.json["workspace"]["background_hooks"]["hooks"] == ["updateContentCommand"]
    devsy.wait_hooks(ws_id)
    devsy.up(project, "--id", ws_id)
    assert (project / "order.log").read_text().split() == ["onCreate", "updateContent"]
    record = json.loads((devsy.home / "workspaces" / ws_id / "workspace.json").read_text())
    assert "postCreateCommand" in record["create_hooks_done"], record


def test_follow_without_hooks_is_a_usage_error(devsy, ws_id):
    result = devsy.run("logs", ws_id, "--follow")
    assert result.returncode != 0 and b"--follow is for --hooks" in result.stderr, result.text



def test_an_interactive_session_runs_post_attach_in_the_background_and_a_command_does_not(devsy, ws_id, guest_image,
                                                                                        tmp_path):
    project = make_project(tmp_path / "p", {"image": guest_image, "containerEnv": {"TOKEN": SECRET},
                                            "postAttachCommand": f"echo attach-$TOKEN; {_log('postAttach')}"})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    devsy.wait_hooks(ws_id)
    assert (project / "order.log").read_text().split() == ["postAttach"]
    for argv in (["ssh", ws_id, "--command", "true"], ["exec", ws_id, "--", "true"]):
        assert devsy.run(*argv).returncode == 0
    assert _background(devsy, ws_id)["state"] == "finished"  # no attach: they ran a command, not a session
    before = _state_file(devsy, ws_id)["pid"]
    session = devsy.run("ssh", ws_id, input=b"echo in-session\nexit 0\n")  # a shell session, no --command
    assert session.returncode == 0 and b"in-session" in session.stdout, session.text
    # The session does not wait for its attach to be taken up: the test waits (bounded) for the process to say so.
    poll_until(lambda: _state_file(devsy, ws_id)["pid"], lambda pid: pid != before, timeout=60, interval=0.1,
               what="the interactive session's postAttachCommand to start")
    log = devsy.wait_hooks(ws_id)
    assert (project / "order.log").read_text().split() == ["postAttach", "postAttach"]
    assert b"an interactive session attached" in log.stdout and b"attach-***" in log.stdout, log.text
    assert SECRET.encode() not in log.stdout
