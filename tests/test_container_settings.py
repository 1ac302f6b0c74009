"""capAdd, securityOpt, privileged, init and hostRequirements.gpu: parsed, carried over the protocol, applied by
Docker (observed in the container), refused or warned about by MicroSandbox (observed in msb's own state)."""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

import pytest

from devsy.devcontainer.backend_settings import _ASKS
from devsy.devcontainer.config import load_config
from devsy.driver.base import GpuRequirement, HostRequirements, RunOptions
from devsy.driver.docker.container_spec import create_kwargs, engine_has_gpu
from devsy.driver.docker.options import DockerOptions
from devsy.driver.microsandbox.options import parse_microsandbox_options
from devsy.driver.microsandbox.spec import build_spec
from devsy.driver.provider_table import provider_rows
from devsy.errors import ConfigError
from devsy.runtime.wire.convert import run_options, run_request
from helpers.cli import HOST_NET, DevsyCli
from helpers.msb import images, sandboxes, volumes
from helpers.projects import make_project

NET_ADMIN, SYS_ADMIN = 12, 21  # capability bit numbers (linux/capability.h)
NO_GPU_ENGINE = {"Runtimes": {"runc": {"path": "runc"}}}
GPU_ENGINE = {"Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}}}
IGNORED = {"capAdd": ["NET_ADMIN"], "securityOpt": ["no-new-privileges:true"], "privileged": True, "init": True}


def _load(tmp_path: Path, config: dict[str, Any]):
    make_project(tmp_path, {"image": "x", **config})
    return load_config(tmp_path, env={})


# --- parsing ------------------------------------------------------------------------------------------------------

def test_settings_are_parsed_and_unset_stays_apart_from_false(tmp_path: Path) -> None:
    config = _load(tmp_path / "a", {"capAdd": ["NET_ADMIN", "SYS_PTRACE"], "securityOpt": ["seccomp=unconfined"],
                                    "privileged": False, "init": True})
    assert (config.cap_add, config.security_opt, config.privileged, config.init) == \
        (["NET_ADMIN", "SYS_PTRACE"], ["seccomp=unconfined"], False, True)
    bare = _load(tmp_path / "b", {})
    assert (bare.cap_add, bare.security_opt, bare.privileged, bare.init) == ([], [], None, None)


@pytest.mark.parametrize(("gpu", "expected"), [
    (True, GpuRequirement.REQUIRED), (False, GpuRequirement.FALSE), ("optional", GpuRequirement.OPTIONAL),
    ({"cores": 1000, "memory": "8gb"}, GpuRequirement.REQUIRED), ({}, GpuRequirement.REQUIRED),
])
def test_gpu_forms(tmp_path: Path, gpu: Any, expected: GpuRequirement) -> None:
    config = _load(tmp_path, {"hostRequirements": {"gpu": gpu}})
    assert config.host_requirements.gpu is expected
    # The object's sizes cannot be measured: said, not dropped.
    assert bool(config.warnings) == (isinstance(gpu, dict) and bool(gpu))


@pytest.mark.parametrize(("config", "field"), [
    ({"capAdd": "NET_ADMIN"}, '"capAdd"'), ({"capAdd": ["NET_ADMIN", 7]}, '"capAdd[1]"'),
    ({"securityOpt": {"a": 1}}, '"securityOpt"'), ({"securityOpt": [""]}, '"securityOpt[0]"'),
    ({"privileged": "yes"}, '"privileged"'), ({"init": 1}, '"init"'),
    ({"hostRequirements": {"gpu": "yes"}}, '"hostRequirements.gpu"'),
    ({"hostRequirements": {"gpu": 1}}, '"hostRequirements.gpu"'),
    ({"hostRequirements": {"gpu": {"cores": 0}}}, '"hostRequirements.gpu.cores"'),
    ({"hostRequirements": {"gpu": {"memory": "lots"}}}, '"hostRequirements.gpu.memory"'),
    ({"hostRequirements": {"gpu": {"vram": "8gb"}}}, '"hostRequirements.gpu"'),
])
def test_bad_types_name_the_field(tmp_path: Path, config: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(field)) as excinfo:
        _load(tmp_path, config)
    assert excinfo.value.hint


# --- the protocol ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flag", [None, False, True])
@pytest.mark.parametrize("gpu", list(GpuRequirement))
def test_settings_round_trip_over_the_protocol(flag: bool | None, gpu: GpuRequirement) -> None:
    options = RunOptions(image="img", cap_add=["NET_ADMIN"], security_opt=["label=disable"], privileged=flag,
                         init=flag, host_requirements=HostRequirements(gpu=gpu))
    request = run_request("ws", options)
    assert request.HasField("privileged") == (flag is not None) == request.HasField("init")
    back = run_options(request)
    assert (back.cap_add, back.security_opt, back.privileged, back.init, back.host_requirements.gpu) == \
        (["NET_ADMIN"], ["label=disable"], flag, flag, gpu)


# --- Docker: the create request -------------------------------------------------------------------------------------

def _kwargs(gpu: GpuRequirement, info: dict, **settings: Any) -> dict[str, Any]:
    options = RunOptions(image="img", host_requirements=HostRequirements(gpu=gpu), **settings)
    return create_kwargs("ws", options, DockerOptions(), engine_info=lambda: info)


def test_docker_kwargs_carry_the_settings_and_leave_unset_ones_to_the_engine() -> None:
    kwargs = _kwargs(GpuRequirement.UNSET, {}, cap_add=["NET_ADMIN"], security_opt=["no-new-privileges"],
                     privileged=False, init=True)
    assert (kwargs["cap_add"], kwargs["security_opt"], kwargs["privileged"], kwargs["init"]) == \
        (["NET_ADMIN"], ["no-new-privileges"], False, True)
    assert not {"cap_add", "security_opt", "privileged", "init", "device_requests"} & set(_kwargs(
        GpuRequirement.UNSET, {}))


@pytest.mark.parametrize("gpu", [GpuRequirement.REQUIRED, GpuRequirement.OPTIONAL])
def test_docker_requests_every_gpu_when_the_engine_has_a_gpu_runtime(gpu: GpuRequirement) -> None:
    assert engine_has_gpu(GPU_ENGINE) and not engine_has_gpu(NO_GPU_ENGINE)
    (request,) = _kwargs(gpu, GPU_ENGINE)["device_requests"]
    # What `docker run --gpus all` sends.
    assert dict(request) == {"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}
    assert "device_requests" not in _kwargs(GpuRequirement.OPTIONAL, NO_GPU_ENGINE)
    with pytest.raises(ConfigError, match="requires a GPU, but this Docker engine has none"):
        _kwargs(GpuRequirement.REQUIRED, NO_GPU_ENGINE)


def test_docker_does_not_ask_the_engine_unless_a_gpu_is_wanted() -> None:
    def refuse() -> dict:
        raise AssertionError("the engine was asked although no GPU is wanted")

    for gpu in (GpuRequirement.UNSET, GpuRequirement.FALSE):
        create_kwargs("ws", RunOptions(image="i", host_requirements=HostRequirements(gpu=gpu)), DockerOptions(),
                      engine_info=refuse)


# --- MicroSandbox and the provider table ----------------------------------------------------------------------------

def test_msb_spec_refuses_a_required_gpu_for_any_caller() -> None:
    options = RunOptions(image="img", host_requirements=HostRequirements(gpu=GpuRequirement.REQUIRED))
    with pytest.raises(ConfigError, match="requires a GPU, but MicroSandbox has none"):
        build_spec("ws", options, parse_microsandbox_options({}), rootfs_dir=False)
    options.host_requirements = HostRequirements(gpu=GpuRequirement.OPTIONAL)
    build_spec("ws", options, parse_microsandbox_options({}), rootfs_dir=False)


def test_every_ignored_setting_in_the_table_is_one_devsy_knows() -> None:
    rows = {row.name: row for row in provider_rows()}
    for row in rows.values():
        assert set(row.ignored_settings) <= set(_ASKS), row.name
    assert set(rows["microsandbox"].ignored_settings) == set(rows["external-microsandbox"].ignored_settings) == \
        set(IGNORED)


# --- through the real CLI: Docker -----------------------------------------------------------------------------------

def _status(docker_client, ws: str, pid: str = "1") -> dict[str, str]:
    """/proc/PID/status of the workspace's container, read through the engine (not through devsy)."""
    out = docker_client.containers.get(f"devsy-{ws}").exec_run(["cat", f"/proc/{pid}/status"]).output.decode()
    return dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)


def _caps(status: dict[str, str]) -> int:
    return int(status["CapEff"].strip(), 16)


@pytest.mark.parametrize("provider", ["docker", "external-docker"])
def test_docker_applies_cap_add_security_opt_and_init(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                      tmp_path: Path, docker_client, provider: str) -> None:
    config = {"image": guest_image, "capAdd": ["NET_ADMIN"], "securityOpt": ["no-new-privileges:true"],
              "init": True}
    result = devsy.up(make_project(tmp_path / "p", config), "--id", ws_id, "--provider", provider, *HOST_NET)
    assert result.json["warnings"] == []
    status = _status(docker_client, ws_id)
    assert _caps(status) >> NET_ADMIN & 1, status["CapEff"]
    assert not _caps(status) >> SYS_ADMIN & 1
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Name"].strip() == "docker-init"  # the engine's init (tini) is PID 1


def _engine_runs_privileged(docker_client, image: str) -> bool:
    """Whether this engine can start a privileged container at all (one whose host lacks a capability cannot:
    runc's "unable to apply caps", which `docker run --privileged` gets as well)."""
    import docker.errors

    # Not containers.run(remove=True): a container whose start fails stays behind in "Created".
    probe = docker_client.containers.create(image, ["true"], privileged=True, network_mode="host",
                                            labels={"dev.devsy.test": "privileged-probe"})
    try:
        probe.start()
    except docker.errors.APIError:
        return False
    finally:
        probe.remove(force=True)
    return True


def test_docker_privileged_and_defaults(devsy: DevsyCli, guest_image: str, tmp_path: Path, docker_client) -> None:
    privileged, plain = f"t-priv-{secrets.token_hex(4)}", f"t-plain-{secrets.token_hex(4)}"
    devsy.up(make_project(tmp_path / "plain", {"image": guest_image, "privileged": False}), "--id", plain, *HOST_NET)
    default = _status(docker_client, plain)
    assert not _caps(default) >> SYS_ADMIN & 1 and not _caps(default) >> NET_ADMIN & 1
    assert default["Name"].strip() != "docker-init" and default["NoNewPrivs"].strip() == "0"
    project = make_project(tmp_path / "priv", {"image": guest_image, "privileged": True})
    if _engine_runs_privileged(docker_client, guest_image):
        devsy.up(project, "--id", privileged, *HOST_NET)
        assert _caps(_status(docker_client, privileged)) >> SYS_ADMIN & 1
        return
    # This engine cannot grant every capability: the privileged request reaches it and fails as `docker run
    # --privileged` does, where the same config without privileged started above; nothing is left.
    result = devsy.up(project, "--id", privileged, *HOST_NET, ok=False)
    assert result.returncode != 0 and "unable to apply caps" in result.json["error"]["message"], result.text
    _nothing_left(devsy, docker_client, privileged)


def _nothing_left(devsy: DevsyCli, docker_client, ws: str) -> None:
    assert docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={ws}"}) == []
    assert not (devsy.home / "workspaces" / ws).exists()
    assert not devsy.ssh_config.exists() or ws not in devsy.ssh_config.read_text()


@pytest.mark.parametrize("provider", ["docker", "external-docker"])
def test_docker_without_a_gpu_runtime_refuses_a_required_gpu(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                             tmp_path: Path, docker_client, provider: str) -> None:
    assert not engine_has_gpu(docker_client.info()), "this test needs an engine without a GPU runtime"
    config = {"image": guest_image, "hostRequirements": {"gpu": True}}
    result = devsy.up(make_project(tmp_path / "p", config), "--id", ws_id, "--provider", provider, *HOST_NET,
                      ok=False)
    assert result.returncode != 0
    assert result.json["error"]["type"] == "config"
    assert "requires a GPU, but this Docker engine has none" in result.json["error"]["message"]
    assert "Traceback" not in result.text
    _nothing_left(devsy, docker_client, ws_id)


def test_docker_without_a_gpu_runtime_warns_about_an_optional_gpu(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                  tmp_path: Path, docker_client) -> None:
    config = {"image": guest_image, "hostRequirements": {"gpu": "optional"}}
    result = devsy.up(make_project(tmp_path / "p", config), "--id", ws_id, *HOST_NET)
    (warning,) = result.json["warnings"]
    assert "optional" in warning and "this Docker engine has no GPU" in warning
    assert result.stderr.decode().count(warning) == 1
    host_config = docker_client.containers.get(f"devsy-{ws_id}").attrs["HostConfig"]
    assert not host_config.get("DeviceRequests")


# --- through the real CLI: MicroSandbox (the real msb; no VM needs to boot for these) ---------------------------------

MSB_PROVIDERS = ["microsandbox", "external-microsandbox"]


@pytest.mark.parametrize("provider", MSB_PROVIDERS)
def test_msb_refuses_a_required_gpu_before_anything_is_created(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                               tmp_path: Path, msb_home: Path, docker_client,
                                                               provider: str) -> None:
    config = {"image": guest_image, "hostRequirements": {"gpu": True}, "mounts": [
        "source=gpu-cache,target=/cache,type=volume"]}
    result = devsy.up(make_project(tmp_path / "p", config), "--id", ws_id, "--provider", provider, ok=False)
    assert result.returncode != 0, result.text
    assert result.json["error"]["type"] == "config"
    assert "requires a GPU, but MicroSandbox has none" in result.json["error"]["message"]
    assert (sandboxes(msb_home), volumes(msb_home), images(msb_home)) == ([], [], [])
    _nothing_left(devsy, docker_client, ws_id)


@pytest.mark.parametrize("provider", MSB_PROVIDERS)
def test_msb_warns_once_about_each_ignored_setting(devsy: DevsyCli, ws_id: str, tmp_path: Path, msb_home: Path,
                                                   provider: str) -> None:
    # An image nobody has: the up fails right after the checks, so no VM needs to boot to see the warnings.
    config = {"image": "127.0.0.1:9/devsy-absent/image:none", **IGNORED, "hostRequirements": {"gpu": "optional"}}
    result = devsy.up(make_project(tmp_path / "p", config), "--id", ws_id, "--provider", provider, ok=False)
    assert result.returncode != 0, result.text
    warnings = result.json["warnings"]
    assert len(warnings) == 5, warnings
    stderr = result.stderr.decode()
    for name in IGNORED:
        (warning,) = [w for w in warnings if f'"{name}"' in w]
        assert "MicroSandbox ignores it" in warning
        assert stderr.count(warning) == 1, stderr
    (gpu,) = [w for w in warnings if "gpu" in w]
    assert "MicroSandbox has no GPU" in gpu and stderr.count(gpu) == 1
    assert json.dumps(result.json)  # one parseable outcome
    assert sandboxes(msb_home) == []
