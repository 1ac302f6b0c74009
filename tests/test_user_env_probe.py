"""userEnvProbe (issue 16, item 3): what the remote user's login/interactive shell sets reaches hooks and sessions.

Observed in the container: an image whose /etc/profile.d and ~/.bashrc set variables and a PATH entry (as version
managers do) gives them to onCreateCommand and to `devsy exec`/`devsy ssh`; "none" gives none; remoteEnv wins; a
startup file that hangs is stopped (its process gone) and `up` goes on; a probed value holding a containerEnv secret
is used by the hooks but never stored.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from helpers.cli import HOST_NET, DevsyCli
from helpers.projects import make_project

pytestmark = pytest.mark.docker

PROBED = 'printf "%s|%s|%s\\n" "${TOOL_HOME-unset}" "${FROM_BASHRC-unset}" "$(command -v mytool || echo none)"'


def _project(root: Path, guest_image: str, config: dict, *, bashrc: str = "export FROM_BASHRC=yes") -> Path:
    project = make_project(root, {"build": {"dockerfile": "Dockerfile"}, "remoteUser": "dev", **config})
    (project / ".devcontainer" / "Dockerfile").write_text(
        f"FROM {guest_image}\n"
        "RUN mkdir -p /opt/tool/bin && printf '#!/bin/sh\\necho tool-ran\\n' > /opt/tool/bin/mytool"
        " && chmod +x /opt/tool/bin/mytool"
        " && printf 'export TOOL_HOME=/opt/tool\\nexport PATH=/opt/tool/bin:$PATH\\n' > /etc/profile.d/tool.sh\n"
        f"RUN printf '%s\\n' '{bashrc}' >> /home/dev/.bashrc\n"
    )
    return project


def _container(docker_client, workspace_id: str):
    return docker_client.containers.list(filters={"label": f"dev.devsy.workspace={workspace_id}"})[0]


def _in_container(docker_client, workspace_id: str, command: str) -> str:
    result = _container(docker_client, workspace_id).exec_run(["sh", "-c", command], user="root")
    return result.output.decode()


def test_login_shell_environment_reaches_hooks_exec_and_ssh(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                             tmp_path: Path, docker_client) -> None:
    project = _project(tmp_path / "p", guest_image, {"onCreateCommand": f"{PROBED} > /tmp/on-create",
                                                     "postStartCommand": f"{PROBED} >> /tmp/post-start"})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    devsy.wait_hooks(ws_id)  # postStartCommand comes after waitFor
    assert _in_container(docker_client, ws_id, "cat /tmp/on-create") == "/opt/tool|yes|/opt/tool/bin/mytool\n"
    # `devsy start` runs postStartCommand with the probe `up` stored.
    assert devsy.run("stop", ws_id).returncode == 0
    assert devsy.run("start", ws_id).returncode == 0
    assert _in_container(docker_client, ws_id, "cat /tmp/post-start") == "/opt/tool|yes|/opt/tool/bin/mytool\n" * 2
    result = devsy.run("exec", ws_id, "--", "sh", "-c", PROBED)
    assert result.returncode == 0, result.text
    assert result.stdout == b"/opt/tool|yes|/opt/tool/bin/mytool\n"
    assert devsy.run("exec", ws_id, "--", "mytool").stdout == b"tool-ran\n"
    ssh = devsy.run("ssh", ws_id, "--command", PROBED)
    assert ssh.returncode == 0, ssh.text
    assert ssh.stdout == b"/opt/tool|yes|/opt/tool/bin/mytool\n"
    # Debian's /etc/profile sets its own PATH: the container's entries it lacks are merged back (sbin ones only
    # for root, as the reference does), so the image's PATH still works.
    path = devsy.run("exec", ws_id, "--", "printenv", "PATH").stdout.decode().strip().split(":")
    image_path = _in_container(docker_client, ws_id, "tr '\\0' '\\n' < /proc/1/environ | sed -n 's/^PATH=//p'")
    assert path[0] == "/opt/tool/bin"
    assert {entry for entry in image_path.strip().split(":") if "sbin" not in entry} <= set(path)


def test_remote_env_wins_and_none_probes_nothing(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                 tmp_path: Path) -> None:
    project = _project(tmp_path / "p", guest_image, {"remoteEnv": {"TOOL_HOME": "from-remote-env"}})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert devsy.run("exec", ws_id, "--", "sh", "-c", PROBED).stdout == b"from-remote-env|yes|/opt/tool/bin/mytool\n"
    none_id = f"{ws_id}-n"
    project = _project(tmp_path / "n", guest_image, {"userEnvProbe": "none",
                                                     "onCreateCommand": f"{PROBED} > /tmp/on-create"})
    try:
        up = devsy.up(project, "--id", none_id, *HOST_NET)
        assert "userEnvProbe" not in up.text
        assert devsy.run("exec", none_id, "--", "sh", "-c", PROBED).stdout == b"unset|unset|none\n"
        assert devsy.run("exec", none_id, "--", "cat", "/tmp/on-create").stdout == b"unset|unset|none\n"
    finally:
        devsy.run("delete", none_id)


def test_an_unknown_mode_is_refused_before_anything_is_created(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                tmp_path: Path, docker_client) -> None:
    project = make_project(tmp_path / "p", {"image": guest_image, "userEnvProbe": "loginShel"})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    assert 'userEnvProbe" must be one of none, loginShell, interactiveShell, loginInteractiveShell' in result.text
    assert not docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={ws_id}"})
    assert not (devsy.home / "workspaces" / ws_id).exists()


def test_a_hanging_startup_file_is_stopped_and_up_goes_on(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                         tmp_path: Path, docker_client) -> None:
    nonce = secrets.token_hex(6)
    project = _project(tmp_path / "p", guest_image, {}, bashrc=f"sleep 3600 # {nonce}")
    up = devsy.up(project, "--id", ws_id, *HOST_NET)
    assert "userEnvProbe took longer than 10s and was stopped" in up.text
    # The cancelled probe's tree is gone from the guest: nothing still runs the startup file.
    assert nonce not in _in_container(docker_client, ws_id, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert devsy.run("exec", ws_id, "--", "true").returncode == 0


def test_a_probed_value_holding_a_secret_is_used_by_hooks_but_not_stored(devsy: DevsyCli, ws_id: str,
                                                                         guest_image: str, tmp_path: Path) -> None:
    token = secrets.token_hex(16)
    project = _project(tmp_path / "p", guest_image,
                       {"containerEnv": {"API_TOKEN": token},
                        "onCreateCommand": 'printf "%s\\n" "${DERIVED-unset}" > /tmp/on-create'},
                       bashrc='export DERIVED="bearer-$API_TOKEN"')
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert devsy.run("exec", ws_id, "--", "cat", "/tmp/on-create").stdout == f"bearer-{token}\n".encode()
    record = (devsy.home / "workspaces" / ws_id / "workspace.json").read_text()
    assert token not in record
    assert '"FROM_BASHRC"' not in record  # the bashrc here sets DERIVED only
    assert '"TOOL_HOME": "/opt/tool"' in record
