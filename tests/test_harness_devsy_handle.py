"""The devsy handle: real subprocesses bounded by the case deadline, parsed JSON outcomes, recorded commands."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.commands import CommandLog, mask_argv
from harness.deadline import Deadline, DeadlineExceeded
from harness.devsy_cli import CommandTimeout
from harness.devsy_handle import DevsyHandle
from harness.outcome import OutcomeError
from harness.providers import PROVIDERS

FAKE_CLI = r'''
import json, os, subprocess, sys, time
args = sys.argv[1:]
if args[0] == "hang":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    open(args[1], "w").write(str(child.pid))
    time.sleep(300)
if args[0] == "up":
    registered = os.path.exists(os.path.join(os.environ["DEVSY_HOME"], "cleanup-registered"))
    print(json.dumps({"outcome": "success", "command": "up", "workspace": {
        "id": args[args.index("--id") + 1], "uid": "u1", "provider": "docker",
        "source": {"kind": "local", "value": args[1]}, "status": "running",
        "instance": {"id": "c1", "created_at": "t1", "status": "running"}, "ssh_host": "w.devsy",
        "remote_user": "dev", "workspace_folder": "/workspaces/src", "content_dir": None, "reused": False},
        "argv": args, "registered_first": registered, "ssh_config": os.environ["DEVSY_SSH_CONFIG"]}))
if args[0] == "status":
    sys.stderr.write("devsy status: error: no such workspace\n")
    print(json.dumps({"outcome": "error", "command": "status",
                      "error": {"type": "workspace-not-found", "message": "gone", "hint": "devsy list"}}))
    sys.exit(1)
if args[0] == "exec":
    sys.stdout.write("not json")
'''


@pytest.fixture
def handle(tmp_path: Path) -> DevsyHandle:
    script = tmp_path / "fake_devsy.py"
    script.write_text(FAKE_CLI)
    home = tmp_path / "home"
    home.mkdir()
    (docker_row,) = [p for p in PROVIDERS if p.name == "builtin-docker"]
    return DevsyHandle(cli=[sys.executable, str(script)], provider=docker_row, home=home,
                       ssh_config=tmp_path / "ssh_config", deadline=Deadline(60), log=CommandLog(),
                       on_create=lambda ws: (home / "cleanup-registered").write_text(ws))


def test_up_registers_cleanup_first_passes_provider_args_and_parses_the_outcome(handle: DevsyHandle) -> None:
    outcome = handle.up("/src", "hx1-w")
    ws = outcome.ws()
    assert (ws.id, ws.source, ws.source_kind, ws.instance.created_at if ws.instance else "") == (
        "hx1-w", "/src", "local", "t1")
    echoed = json.loads(handle.log.records[-1].stdout_tail)
    assert echoed["registered_first"] is True, "cleanup must be registered before `up` may create anything"
    assert echoed["argv"] == ["up", "/src", "--id", "hx1-w", "--provider", "docker",
                              "--provider-option", "NETWORK_MODE=host", "--json"]
    assert echoed["ssh_config"] == str(handle.ssh_config)
    assert handle.created == ["hx1-w"]


def test_error_outcomes_are_typed_and_mismatches_say_what_ran(handle: DevsyHandle) -> None:
    outcome = handle.status("hx1-w")
    assert outcome.expect_error("workspace-not-found").hint == "devsy list"
    with pytest.raises(OutcomeError) as raised:
        outcome.expect_success()
    assert "status hx1-w --json  -> exit 1" in str(raised.value)
    assert "no such workspace" in str(raised.value)
    with pytest.raises(OutcomeError, match="no single JSON object"):
        handle.json("exec")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_command_past_its_deadline_is_killed_with_its_process_group(handle: DevsyHandle, tmp_path: Path) -> None:
    handle.deadline = Deadline(1.5)
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="process group killed"):
        handle.run("hang", str(pid_file))
    assert time.monotonic() - started < 8
    assert handle.log.records[-1].timed_out
    # SIGKILL is delivered asynchronously: give the grandchild a bounded moment to be dead (a zombie, or reaped).
    grandchild, deadline = int(pid_file.read_text()), time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling its state: a non-child cannot be waited for
    assert not _alive(grandchild)
    with pytest.raises(DeadlineExceeded, match="expired before devsy status"):
        handle.status("hx1-w")


def test_recorded_argv_never_shows_env_values() -> None:
    assert mask_argv(["devsy", "exec", "--env", "TOKEN=s3cret", "--env=KEY=v", "w", "--", "env"]) == [
        "devsy", "exec", "--env", "TOKEN=***", "--env=KEY=***", "w", "--", "env"]


def test_enter_command_names_the_owned_home_and_workspace(handle: DevsyHandle) -> None:
    command = handle.enter_command("hx1-w")
    assert command.startswith(f"DEVSY_HOME={handle.home} DEVSY_SSH_CONFIG={handle.ssh_config} ")
    assert command.endswith(" exec hx1-w -- /bin/sh")
