"""devcontainer.json runArgs: the documented subset reaches the container (observed in it), anything else is refused
by name before anything is created, options the Runtime Protocol cannot carry are refused for external providers,
and every top-level property devsy does not act on gives one warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from devsy.devcontainer.config import load_config
from devsy.errors import ConfigError
from helpers.cli import HOST_NET
from helpers.engine import containers_of
from helpers.projects import make_project

SYS_PTRACE = 19  # capability bit number (linux/capability.h)
SECRET = "runargs-secret-7f3e"


def _cap_eff(devsy, ws_id: str) -> int:
    status = devsy.run("exec", ws_id, "-u", "root", "--", "cat", "/proc/1/status").stdout.decode()
    [line] = [line for line in status.splitlines() if line.startswith("CapEff:")]
    return int(line.split()[1], 16)


def test_supported_run_args_are_seen_in_the_container(devsy, ws_id, guest_image, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {
        "image": guest_image,
        "containerEnv": {"X": "from-container-env"},
        "runArgs": ["--cap-add=SYS_PTRACE", "-e", "X=1", f"--env=TOKEN={SECRET}", "--add-host", "h:127.0.0.1",
                    "--label", "team=web", "--shm-size=96m", "--init"],
        "frobnicate": True,  # not a devcontainer.json property: one warning
    })
    result = devsy.up(project, "--id", ws_id, *HOST_NET)
    assert _cap_eff(devsy, ws_id) & (1 << SYS_PTRACE)
    assert devsy.run("exec", ws_id, "--", "printenv", "X").stdout == b"1\n"  # runArgs win, as on docker's line
    assert devsy.run("exec", ws_id, "--", "printenv", "TOKEN").stdout == SECRET.encode() + b"\n"
    hosts = devsy.run("exec", ws_id, "--", "getent", "hosts", "h").stdout.decode().split()
    assert hosts[:2] == ["127.0.0.1", "h"]
    shm = devsy.run("exec", ws_id, "--", "df", "-k", "--output=size", "/dev/shm").stdout.decode().split()
    assert int(shm[-1]) == 96 * 1024
    pid1 = devsy.run("exec", ws_id, "--", "cat", "/proc/1/comm").stdout.strip()
    assert pid1 in (b"docker-init", b"tini")
    [container] = containers_of(docker_client, ws_id)
    assert container.labels["team"] == "web"
    frobnicate = [w for w in result.json["warnings"] if "frobnicate" in w]
    assert len(frobnicate) == 1 and "ignored" in frobnicate[0]
    assert result.stderr.decode().count('"frobnicate"') == 1
    assert SECRET not in result.text  # an env value passed by runArgs is a secret like containerEnv's


@pytest.mark.parametrize(("run_args", "named"), [(["--network=bridge"], "--network"), (["--pid", "host"], "--pid")])
def test_an_unsupported_run_arg_is_refused_by_name_and_nothing_is_left(devsy, ws_id, guest_image, tmp_path,
                                                                      docker_client, run_args, named):
    project = make_project(tmp_path / "p", {"image": guest_image, "runArgs": ["--init", *run_args]})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] == "config"
    assert f'"runArgs[1]": "{named}" is not supported' in error["message"]
    assert "Traceback" not in result.text
    assert containers_of(docker_client, ws_id) == []
    assert devsy.run("list", "--json").json["workspaces"] == []


def test_run_args_the_protocol_cannot_carry_are_refused_for_external_providers(devsy, ws_id, guest_image, tmp_path,
                                                                              docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image, "runArgs": ["--add-host=h:127.0.0.1"]})
    result = devsy.up(project, "--id", ws_id, "--provider", "external-docker", *HOST_NET, ok=False)
    error = result.json["error"]
    assert error["type"] == "config"
    assert "runArgs --add-host cannot be applied by provider external-docker" in error["message"]
    assert containers_of(docker_client, ws_id) == []


@pytest.mark.parametrize(("run_args", "message"), [
    (["--cap-add"], '"--cap-add" needs a value'),
    (["--privileged=maybe"], '"--privileged" takes true or false'),
    (["--add-host", "nohost"], '"--add-host" needs HOST:IP'),
    (["--shm-size", "lots"], '"--shm-size" must be a size'),
    (["--label", "dev.devsy.workspace=x"], "reserved namespace"),
    (["--env-file", "secrets.env"], '"--env-file" is not supported'),
    (["ubuntu"], '"ubuntu" is not an option'),
])
def test_malformed_run_args_name_the_entry(tmp_path: Path, run_args: list[str], message: str) -> None:
    make_project(tmp_path, {"image": "x", "runArgs": run_args})
    with pytest.raises(ConfigError, match="runArgs") as caught:
        load_config(tmp_path, env={})
    assert message in caught.value.message and caught.value.hint


def test_both_forms_and_privileged_false(tmp_path: Path) -> None:
    make_project(tmp_path, {"image": "x", "privileged": True, "capAdd": ["NET_ADMIN"], "runArgs": [
        "--cap-add", "SYS_PTRACE", "--security-opt=seccomp=unconfined", "--privileged=false", "-e", "FROM_HOST",
        "--device=/dev/fuse"]})
    config = load_config(tmp_path, env={"FROM_HOST": "h"})
    assert (config.cap_add, config.security_opt, config.privileged) == \
        (["NET_ADMIN", "SYS_PTRACE"], ["seccomp=unconfined"], False)
    assert config.container_env == {"FROM_HOST": "h"} and config.devices == ["/dev/fuse"]


def test_spec_properties_devsy_does_not_apply_warn_once_each(tmp_path: Path) -> None:
    make_project(tmp_path, {"image": "x", "forwardPorts": [3000], "shutdownAction": "none",
                            "customizations": {"vscode": {}}, "name": "n", "$schema": "https://x"})
    warnings = load_config(tmp_path, env={}).warnings
    assert [w.split('"')[1] for w in warnings] == ["forwardPorts", "shutdownAction"]
