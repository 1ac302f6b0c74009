"""remoteEnv in every session and hook, observed in the container (issue 16, item 3).

`devsy exec` and `devsy ssh --command` see remoteEnv's values; `"PATH": "${containerEnv:PATH}:/extra"` extends the
container's PATH as people write it; `"X": null` unsets a containerEnv variable in sessions and lifecycle hooks.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers.cli import HOST_NET, DevsyCli, cli_env
from helpers.projects import make_project

VALUES = 'printf "%s|%s\\n" "$X" "$PATH"'
GONE = 'printf "%s\\n" "${GONE-unset}"'
NO_MASTER = {"DEVSY_SSH_MUX": "0"}


def _container_path(docker_client, image: str) -> str:
    env = docker_client.images.get(image).attrs["Config"]["Env"]
    return next(entry.split("=", 1)[1] for entry in env if entry.startswith("PATH="))


def _container(docker_client, workspace_id: str):
    return docker_client.containers.list(filters={"label": f"dev.devsy.workspace={workspace_id}"})[0]


@pytest.fixture
def values_ws(devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path) -> str:
    config = {
        "image": guest_image,
        "remoteUser": "dev",
        "remoteEnv": {"X": "from-remote-env", "PATH": "${containerEnv:PATH}:/extra"},
        "postCreateCommand": f"{VALUES} > /tmp/post-create-env",
    }
    devsy.up(make_project(tmp_path / "values", config), "--id", ws_id, *HOST_NET)
    devsy.wait_hooks(ws_id)  # postCreateCommand comes after waitFor
    return ws_id


@pytest.fixture
def null_ws(devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path) -> str:
    config = {
        "image": guest_image,
        "remoteUser": "dev",
        "containerEnv": {"GONE": "from-container-env"},
        "remoteEnv": {"GONE": None},
        "postCreateCommand": f"{GONE} > /tmp/post-create-env",
    }
    devsy.up(make_project(tmp_path / "null", config), "--id", ws_id, *HOST_NET)
    devsy.wait_hooks(ws_id)
    return ws_id


def _expected(docker_client, image: str) -> bytes:
    return f"from-remote-env|{_container_path(docker_client, image)}:/extra\n".encode()


def test_exec_session_gets_remote_env(devsy: DevsyCli, values_ws: str, docker_client, guest_image: str) -> None:
    result = devsy.run("exec", values_ws, "--", "sh", "-c", VALUES)
    assert result.returncode == 0, result.text
    assert result.stdout == _expected(docker_client, guest_image)


def test_exec_env_option_wins_over_remote_env(devsy: DevsyCli, values_ws: str) -> None:
    result = devsy.run("exec", "--env", "X=cli", values_ws, "--", "sh", "-c", VALUES)
    assert result.returncode == 0, result.text
    assert result.stdout.startswith(b"cli|")


@pytest.mark.parametrize("env", [{}, NO_MASTER], ids=["ssh-master", "own-connection"])
def test_ssh_session_gets_remote_env(devsy: DevsyCli, values_ws: str, docker_client, guest_image: str,
                                     env: dict[str, str]) -> None:
    result = devsy.run("ssh", values_ws, "--command", VALUES, extra_env=env)
    assert result.returncode == 0, result.text
    assert result.stdout == _expected(docker_client, guest_image)


def _openssh(devsy: DevsyCli, workspace_id: str, command: str) -> subprocess.CompletedProcess:
    """The user's own OpenSSH client through the entry `devsy up` wrote (ProxyCommand `devsy ssh --stdio`)."""
    return subprocess.run(["ssh", "-F", str(devsy.ssh_config), f"{workspace_id}.devsy", command], capture_output=True,
                          timeout=120, stdin=subprocess.DEVNULL, env=cli_env(devsy))


def test_openssh_session_gets_remote_env(devsy: DevsyCli, values_ws: str, docker_client, guest_image: str) -> None:
    result = _openssh(devsy, values_ws, VALUES)
    assert (result.returncode, result.stdout) == (0, _expected(docker_client, guest_image)), result.stderr


def test_hooks_get_remote_env(values_ws: str, docker_client, guest_image: str) -> None:
    code, output = _container(docker_client, values_ws).exec_run(["cat", "/tmp/post-create-env"])
    assert code == 0, output
    assert output == _expected(docker_client, guest_image)


def test_null_unsets_in_sessions_and_hooks(devsy: DevsyCli, null_ws: str, docker_client) -> None:
    container = _container(docker_client, null_ws)
    assert "GONE=from-container-env" in container.attrs["Config"]["Env"]  # the instance keeps it: remote only
    assert container.exec_run(["cat", "/tmp/post-create-env"]).output == b"unset\n"
    for argv, env in ((["exec", null_ws, "--", "sh", "-c", GONE], {}), (["ssh", null_ws, "--command", GONE], {}),
                      (["ssh", null_ws, "--command", GONE], NO_MASTER)):
        result = devsy.run(*argv, extra_env=env)
        assert (result.returncode, result.stdout) == (0, b"unset\n"), (argv, env, result.text)
    openssh = _openssh(devsy, null_ws, GONE)
    assert (openssh.returncode, openssh.stdout) == (0, b"unset\n"), openssh.stderr
    # An explicit --env still sets it.
    assert devsy.run("exec", "--env", "GONE=back", null_ws, "--", "sh", "-c", GONE).stdout == b"back\n"


def test_a_config_broken_after_up_leaves_sessions_working_without_remote_env(
        devsy: DevsyCli, values_ws: str, tmp_path: Path) -> None:
    """Sessions re-read devcontainer.json for remoteEnv; an edit that breaks it must not lock the developer out of
    the instance a failed `up` keeps (catalogue failure-cleanup/existing-preserved): the session runs, says so."""
    (tmp_path / "values" / ".devcontainer" / "devcontainer.json").write_text('{"image": ')
    for argv, env in ((["exec", values_ws, "--", "sh", "-c", VALUES], {}),
                      (["ssh", values_ws, "--command", VALUES], {}), (["ssh", values_ws, "--command", VALUES], NO_MASTER)):
        result = devsy.run(*argv, extra_env=env)
        assert result.returncode == 0, (argv, env, result.text)
        assert result.stdout.startswith(b"|"), (argv, result.stdout)  # X is remoteEnv's alone: not applied
        assert "remoteEnv is not applied to this session" in result.text, result.text
