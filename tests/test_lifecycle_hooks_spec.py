"""Every devcontainer lifecycle hook through the real CLI on the real engine, observed where it ran: markers in the
container (docker exec, not devsy) and, for initializeCommand, on the host."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from devsy.process_tree import stop_pid
from fixtures.process_observer import ObservedProcess, ProcessObserver
from helpers.cli import DEVSY, HOST_NET, cli_env
from helpers.engine import containers_of
from helpers.projects import make_project

ORDER = "/var/tmp/hook-order"


def _in_container(docker_client, ws_id: str, *argv: str) -> str:
    (container,) = containers_of(docker_client, ws_id)
    code, out = container.exec_run(list(argv))
    assert code == 0, out
    return out.decode()


def _append(name: str) -> str:
    return f"echo {name} >> {ORDER}"


def test_every_hook_runs_in_spec_order_and_a_second_up_reruns_only_start_and_attach(devsy, ws_id, guest_image,
                                                                                   tmp_path, docker_client):
    project = make_project(tmp_path / "p", {
        "image": guest_image,
        "initializeCommand": ["sh", "-c", "pwd >> init-marker"],  # array form, on the host, in the project folder
        "onCreateCommand": _append("onCreate"),
        "updateContentCommand": ["sh", "-c", _append("updateContent")],
        "postCreateCommand": {"only": _append("postCreate")},
        "postStartCommand": _append("postStart"),
        "postAttachCommand": {"x": ["sh", "-c", _append("postAttach")]},
    })
    first = devsy.up(project, "--id", ws_id, *HOST_NET)
    # waitFor (default updateContentCommand): the later hooks go on in the background (test_wait_for.py).
    assert "postCreateCommand, postStartCommand, postAttachCommand go on in the background" in first.stderr.decode()
    devsy.wait_hooks(ws_id)
    assert _in_container(docker_client, ws_id, "cat", ORDER).split() == [
        "onCreate", "updateContent", "postCreate", "postStart", "postAttach"]

    assert devsy.run("stop", ws_id).returncode == 0
    devsy.up(project, "--id", ws_id)
    devsy.wait_hooks(ws_id)
    assert _in_container(docker_client, ws_id, "cat", ORDER).split() == [
        "onCreate", "updateContent", "postCreate", "postStart", "postAttach", "postStart", "postAttach"]
    assert (project / "init-marker").read_text().split() == [str(project.resolve())] * 2


def test_object_form_runs_its_entries_in_parallel(devsy, ws_id, guest_image, tmp_path, docker_client):
    # "a" (first in key order) waits, bounded, for the file "b" creates: run one after another, "a" times out.
    wait_for_b = ("i=0; while [ ! -e /var/tmp/b-ran ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
                  "[ -e /var/tmp/b-ran ] && echo a-saw-b && echo a >> /var/tmp/par")
    project = make_project(tmp_path / "p", {
        "image": guest_image,
        "postCreateCommand": {"a": wait_for_b, "b": "touch /var/tmp/b-ran && echo b >> /var/tmp/par"},
    })
    devsy.up(project, "--id", ws_id, *HOST_NET)
    log = devsy.wait_hooks(ws_id)  # postCreateCommand comes after waitFor: its output is in the hooks' log
    assert _in_container(docker_client, ws_id, "cat", "/var/tmp/par").split() == ["b", "a"]
    assert b"[postCreateCommand:a] a-saw-b" in log.stdout  # each entry's output names it


def test_a_failing_entry_is_named_with_its_output(devsy, ws_id, guest_image, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {
        "image": guest_image,
        "postAttachCommand": {"good": "true", "bad": "echo bad-entry-output; exit 4"},
    })
    # --wait-all-hooks: postAttachCommand runs before `up` returns, so its failure fails the up.
    result = devsy.up(project, "--id", ws_id, "--wait-all-hooks", *HOST_NET, ok=False)
    assert result.returncode != 0
    message = result.json["error"]["message"]
    assert "postAttachCommand:bad failed with exit code 4" in message and "bad-entry-output" in message
    assert "postAttachCommand:good" not in message
    assert containers_of(docker_client, ws_id) == []


def test_failing_update_content_command_is_named_and_redacted(devsy, ws_id, guest_image, tmp_path, docker_client):
    secret = "uc-secret-7f3a9b"
    project = make_project(tmp_path / "p", {
        "image": guest_image,
        "containerEnv": {"TOKEN": secret},
        "updateContentCommand": "echo token=$TOKEN; exit 2",
    })
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    assert "updateContentCommand failed with exit code 2" in result.json["error"]["message"]
    assert "running updateContentCommand: failed after" in result.stderr.decode(), result.text  # not "done"
    assert "token=***" in result.json["error"]["message"]
    assert secret not in result.text
    assert containers_of(docker_client, ws_id) == []


def test_failing_initialize_command_stops_up_before_anything_exists(devsy, ws_id, guest_image, tmp_path,
                                                                   docker_client):
    project = make_project(tmp_path / "p", {
        "image": guest_image,
        "initializeCommand": "echo init-broke; exit 5",
        "onCreateCommand": "true",
    })
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    message = result.json["error"]["message"]
    assert "initializeCommand failed with exit code 5 on the host" in message and "init-broke" in message
    assert containers_of(docker_client, ws_id) == []
    assert not (devsy.home / "workspaces" / ws_id).exists()
    listed = devsy.run("list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["workspaces"] == []


def test_an_initialize_command_killed_by_a_signal_reports_the_shells_status(devsy, ws_id, guest_image, tmp_path,
                                                                            docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image, "initializeCommand": "kill -TERM $$"})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert "initializeCommand failed with exit code 143 on the host" in result.json["error"]["message"]
    assert containers_of(docker_client, ws_id) == []


def test_wait_for_outside_the_spec_is_refused(devsy, ws_id, guest_image, tmp_path: Path, docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image, "waitFor": "postCreate"})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    assert '"waitFor" must be one of' in result.json["error"]["message"]
    assert containers_of(docker_client, ws_id) == []


def test_an_up_killed_during_update_content_resumes_there(devsy, ws_id, guest_image, tmp_path):
    from test_faults_up import _BLOCK_UNTIL_RELEASED, _kill_up_when_signalled

    project = make_project(tmp_path / "p", {
        "image": guest_image,
        "onCreateCommand": "echo run >> on-create.log",
        "updateContentCommand": f"echo run >> update-content.log; {_BLOCK_UNTIL_RELEASED}",
        "postCreateCommand": "echo run >> post-create.log",
    })
    _kill_up_when_signalled(devsy, ws_id, project)
    (project / "release").touch()
    devsy.up(project, "--id", ws_id, *HOST_NET)
    devsy.wait_hooks(ws_id)  # postCreateCommand comes after waitFor
    # The workspace folder is the project's bind mount: the hooks' logs are seen on the host.
    assert (project / "on-create.log").read_text() == "run\n"  # completed before the kill: not again
    assert (project / "update-content.log").read_text() == "run\nrun\n"  # unfinished: run again
    assert (project / "post-create.log").read_text() == "run\n"


def _on_host(argv: list[str]) -> tuple[int, bytes]:
    done = subprocess.run(argv, capture_output=True, timeout=60)
    return done.returncode, done.stdout


_NONCE = "initialize-entry-7c1e"  # in each sleep's environment: what the observer recognises it by
_EXECS = f"echo $$ > started.fifo; DEVSY_NONCE={_NONCE} exec sleep 600"  # the pid written keeps running
_FORKS = f"DEVSY_NONCE={_NONCE} sleep 600 & echo $! > started.fifo; wait"  # the shell's child, a stop of it leaves


def _interrupt_up_once_started(devsy, ws_id: str, project: Path, count: int,
                               signum: int = signal.SIGINT) -> tuple[int, list[ObservedProcess]]:
    """Start `devsy up`, wait (bounded) until `count` host commands wrote their pid to the project's FIFO, then
    send `signum` to devsy alone (its own session: no terminal reaches the commands); devsy's exit status (-1: it did not end
    within 60 s) and those processes."""
    started = project / "started.fifo"
    os.mkfifo(started)
    signal_fd = os.open(started, os.O_RDWR | os.O_NONBLOCK)  # never blocks a writer; select sees only real data
    proc = subprocess.Popen([*DEVSY, "up", str(project), "--id", ws_id, *HOST_NET], env=cli_env(devsy),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        data, deadline = b"", time.monotonic() + 120
        while data.count(b"\n") < count:
            ready, _, _ = select.select([signal_fd], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"{count} initializeCommand entries did not start within 120 s (got {data!r})"
            data += os.read(signal_fd, 4096)
        observed = [OBSERVER.identify(int(line), _NONCE) for line in data.split()]
        proc.send_signal(signum)
        try:
            return proc.wait(timeout=60), observed
        except subprocess.TimeoutExpired:
            return -1, observed
    finally:
        os.close(signal_fd)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


OBSERVER = ProcessObserver(_on_host)


@pytest.mark.parametrize(("initialize", "count"), [({"a": _EXECS, "b": _EXECS}, 2), (_FORKS, 1),
                                                   ({"a": _FORKS, "b": _FORKS}, 2)], ids=["parallel", "child", "both"])
def test_ctrl_c_stops_every_initialize_command_process(devsy, ws_id, guest_image, tmp_path, docker_client,
                                                       initialize, count):
    project = make_project(tmp_path / "p", {"image": guest_image, "initializeCommand": initialize})
    code, observed = _interrupt_up_once_started(devsy, ws_id, project, count)
    try:
        assert code == 128 + signal.SIGINT, "devsy up did not end within 60 s of its SIGINT (it waited for the entries)"
        # devsy has reaped what it stopped; an orphan's zombie may wait a moment for its new parent's reap.
        assert OBSERVER.wait_dead(observed, timeout=10) == [], "an entry's process outlived the interrupted up"
        assert containers_of(docker_client, ws_id) == []
    finally:
        for process in observed:
            stop_pid(process.pid, process.start_time, group=False, grace=0)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_end_up_as_ctrl_c_does(devsy, ws_id, guest_image, tmp_path, docker_client, signum):
    """A `kill` or a closed terminal during initializeCommand: its processes stopped, nothing left, 128+N."""
    project = make_project(tmp_path / "p", {"image": guest_image, "initializeCommand": {"a": _FORKS}})
    code, observed = _interrupt_up_once_started(devsy, ws_id, project, 1, signum)
    try:
        assert code == 128 + signum, f"devsy up did not end within 60 s of its {signum!r} (exit {code})"
        assert OBSERVER.wait_dead(observed, timeout=10) == [], "an entry's process outlived the terminated up"
        assert containers_of(docker_client, ws_id) == []
        assert not (devsy.home / "workspaces" / ws_id).exists(), "the terminated first up left its record"
    finally:
        for process in observed:
            stop_pid(process.pid, process.start_time, group=False, grace=0)
