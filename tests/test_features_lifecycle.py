"""What a Feature contributes beyond its image layer, through the real CLI on the real engine, observed in the
container: its lifecycle commands run before the config's own (create hooks once, postStart on each start, also
in the background after waitFor), and its capAdd/securityOpt/init reach the instance's run options."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import HOST_NET, DevsyCli
from helpers.engine import containers_of
from helpers.projects import make_project
from helpers.features import make_feature as _feature

pytestmark = pytest.mark.docker


def _log(name: str) -> str:
    return f"echo {name} >> /var/tmp/order"


def _order(devsy: DevsyCli, ws_id: str) -> list[str]:
    result = devsy.run("exec", ws_id, "--", "cat", "/var/tmp/order")
    assert result.returncode == 0, result.text
    return result.stdout.decode().split()


def test_feature_lifecycle_commands_run_before_the_configs_own(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {
        "image": guest_image, "features": {"./hooked": {}},
        "onCreateCommand": _log("config-onCreate"), "postCreateCommand": _log("config-postCreate"),
        "postStartCommand": _log("config-postStart"),
    })
    _feature(project, "hooked", "true\n", onCreateCommand=_log("feature-onCreate"),
             postCreateCommand=_log("feature-postCreate"), postStartCommand=["sh", "-c", _log("feature-postStart")])
    devsy.up(project, "--id", ws_id, *HOST_NET)
    devsy.wait_hooks(ws_id)  # postCreate and postStart come after waitFor
    assert _order(devsy, ws_id) == ["feature-onCreate", "config-onCreate", "feature-postCreate", "config-postCreate",
                                    "feature-postStart", "config-postStart"]
    assert devsy.run("stop", ws_id).returncode == 0
    started = devsy.run("start", ws_id)  # the reused instance's Features are found again, without a build
    assert started.returncode == 0, started.text
    assert _order(devsy, ws_id)[6:] == ["feature-postStart", "config-postStart"]
    devsy.up(project, "--id", ws_id)  # a reused running instance: its create hooks are done, no postStart
    devsy.wait_hooks(ws_id)
    assert len(_order(devsy, ws_id)) == 8


def test_feature_run_options_reach_the_instance(devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path,
                                                docker_client) -> None:
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {"./debugger": {}},
                                            "capAdd": ["NET_ADMIN"]})
    _feature(project, "debugger", "true\n", capAdd=["SYS_PTRACE"], securityOpt=["seccomp=unconfined"], init=True)
    devsy.up(project, "--id", ws_id, *HOST_NET)
    (container,) = containers_of(docker_client, ws_id)
    host_config = container.attrs["HostConfig"]
    assert sorted(host_config["CapAdd"]) == ["CAP_NET_ADMIN", "CAP_SYS_PTRACE"] or \
        sorted(host_config["CapAdd"]) == ["NET_ADMIN", "SYS_PTRACE"], host_config["CapAdd"]
    assert host_config["SecurityOpt"] == ["seccomp=unconfined"] and host_config["Init"] is True, host_config


def test_a_remote_env_null_unsets_in_feature_lifecycle_commands_too(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                    tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {
        "image": guest_image, "features": {"./hooked": {}}, "containerEnv": {"GONE": "from-container-env"},
        "remoteEnv": {"GONE": None}, "onCreateCommand": 'echo "config=${GONE-unset}" >> /var/tmp/order',
    })
    _feature(project, "hooked", "true\n", onCreateCommand='echo "feature=${GONE-unset}" >> /var/tmp/order')
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert _order(devsy, ws_id) == ["feature=unset", "config=unset"]
