"""userEnvProbe's result is the remote user's shell environment: a session as another user (`exec -u`,
`ssh --user`) must not get it (it carried the remote user's HOME and a PATH without sbin), and a remoteEnv null
removes a probed variable from `devsy ssh` sessions too (the guest agent set the probed value after the unset)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
from pathlib import Path

import pytest

from helpers.cli import DEVSY, HOST_NET, DevsyCli, cli_env
from test_faults_build import _lines_until
from test_user_env_probe import _project

pytestmark = pytest.mark.docker

SHOW = 'printf "%s|%s|%s\\n" "$HOME" "${FROM_BASHRC-unset}" "${TOOL_HOME-unset}"'


def test_another_users_session_gets_no_probe_and_a_null_unsets_a_probed_variable(devsy: DevsyCli, ws_id: str,
                                                                                 guest_image: str,
                                                                                 tmp_path: Path) -> None:
    project = _project(tmp_path / "p", guest_image, {"remoteEnv": {"TOOL_HOME": None}})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    # The remote user's sessions: the probe's FROM_BASHRC, and TOOL_HOME removed by the null.
    for command in (("exec", ws_id, "--", "sh", "-c", SHOW), ("ssh", ws_id, "--command", SHOW)):
        result = devsy.run(*command)
        assert result.returncode == 0, result.text
        assert result.stdout == b"/home/dev|yes|unset\n", command[0]
    # root's sessions: root's own HOME, none of dev's startup files' variables.
    for command in (("exec", ws_id, "-u", "root", "--", "sh", "-c", SHOW),
                    ("ssh", ws_id, "--user", "root", "--command", SHOW)):
        result = devsy.run(*command)
        assert result.returncode == 0, result.text
        assert result.stdout == b"/root|unset|unset\n", command[0]


def test_sessions_of_an_instance_a_killed_recreate_left_get_no_probe_of_the_replaced_one(
        devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path) -> None:
    project = _project(tmp_path / "p", guest_image, {}, bashrc="export FROM_BASHRC=old-instance")
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert devsy.run("exec", ws_id, "--", "printenv", "FROM_BASHRC").stdout == b"old-instance\n"
    # The new instance's shell sets another value; its `up --recreate` is killed in onCreateCommand.
    marker = f"in-post-create-{ws_id}"
    project = _project(tmp_path / "p", guest_image, {"onCreateCommand": f"echo {marker}; sleep 600"},
                       bashrc="export FROM_BASHRC=new-instance")
    proc = subprocess.Popen([*DEVSY, "up", str(project), "--id", ws_id, "--recreate", *HOST_NET],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env(devsy),
                            start_new_session=True)
    try:
        _lines_until(proc, marker, timeout=240)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    # The instance left is the new one: a session gets its shell's value, never the replaced instance's.
    result = devsy.run("exec", ws_id, "--", "sh", "-c", 'echo "${FROM_BASHRC-unset}"')
    assert result.returncode == 0, result.text
    assert result.stdout == b"new-instance\n"


def test_a_reprobe_of_a_reused_instance_stores_no_value_derived_from_its_own_older_secret(
        devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path) -> None:
    """containerEnv's token changed (T1 -> T2) but the reused instance still holds T1; a changed probe mode probes
    again, and the shell's `bearer-$API_TOKEN` is built from T1: neither stored nor printed."""
    old, new = secrets.token_hex(16), secrets.token_hex(16)
    hook = 'echo "derived=$DERIVED"'
    project = _project(tmp_path / "p", guest_image, {"containerEnv": {"API_TOKEN": old}, "onCreateCommand": hook,
                                                     "userEnvProbe": "loginShell"},
                       bashrc='export DERIVED="bearer-$API_TOKEN"')
    devsy.up(project, "--id", ws_id, *HOST_NET)
    project = _project(tmp_path / "p", guest_image, {"containerEnv": {"API_TOKEN": new},
                                                     "postAttachCommand": hook, "waitFor": "postAttachCommand",
                                                     "userEnvProbe": "loginInteractiveShell"},
                       bashrc='export DERIVED="bearer-$API_TOKEN"')
    again = devsy.up(project, "--id", ws_id)
    assert again.returncode == 0, again.text
    assert "derived=***" in again.stderr.decode(), again.text  # the hook got it, masked in devsy's output
    record = (devsy.home / "workspaces" / ws_id / "workspace.json").read_text()
    assert old not in record and old not in again.text
    assert devsy.run("exec", ws_id, "--", "printenv", "API_TOKEN").stdout == f"{old}\n".encode()  # still T1
