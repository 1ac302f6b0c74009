"""hostRequirements are minimums the provider's host must meet, checked before anything is created, and never caps:
an unmet one is a clear error naming the field and leaves no container, image or record; a met one leaves the
container without a CPU quota or memory limit. The built-in Docker driver and devsy-provider-docker (the same driver
behind the Runtime Protocol) both check."""

from __future__ import annotations

import secrets

import pytest

from devsy.driver.base import HostRequirements, RunOptions
from devsy.driver.docker.driver import DockerDriver
from devsy.errors import ConfigError
from helpers.cli import HOST_NET
from helpers.engine import containers_of
from helpers.projects import make_project

pytestmark = pytest.mark.usefixtures("guest_image")


def _built_project(root, guest_image: str, requirements: dict):
    project = make_project(root, {"build": {"dockerfile": "Dockerfile"}, "hostRequirements": requirements})
    (project / ".devcontainer" / "Dockerfile").write_text(f"FROM {guest_image}\nRUN echo built > /built\n")
    return project


@pytest.mark.parametrize("provider", ["docker", "external-docker"])
def test_more_cpus_than_the_engine_has_is_refused_and_nothing_is_left(devsy, ws_id, guest_image, tmp_path,
                                                                      docker_client, provider):
    ncpu = docker_client.info()["NCPU"]
    project = _built_project(tmp_path / "p", guest_image, {"cpus": 128})
    result = devsy.up(project, "--id", ws_id, "--provider", provider, *HOST_NET, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] == "config", error
    assert error["message"] == f'"hostRequirements.cpus": the devcontainer needs 128 CPUs, this Docker engine ' \
                               f"has {ncpu}"
    assert "Range of CPUs" not in result.text and "Traceback" not in result.text
    assert "building image" not in result.stderr.decode()  # refused before the image is prepared
    assert containers_of(docker_client, ws_id) == []
    assert docker_client.images.list(filters={"label": f"dev.devsy.workspace={ws_id}"}) == []
    assert devsy.run("list", "--json").json["workspaces"] == []


def test_more_memory_than_the_engine_has_is_refused_naming_the_field(devsy, ws_id, guest_image, tmp_path,
                                                                    docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image, "hostRequirements": {"memory": "4096tb"}})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    error = result.json["error"]
    assert error["type"] == "config"
    assert error["message"].startswith('"hostRequirements.memory": the devcontainer needs 4194304.0 GiB')
    assert "this Docker engine has" in error["message"]
    assert containers_of(docker_client, ws_id) == []


def test_a_met_requirement_does_not_cap_the_container(devsy, ws_id, guest_image, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image,
                                            "hostRequirements": {"cpus": 1, "memory": "64mb", "storage": "1gb"}})
    result = devsy.up(project, "--id", ws_id, *HOST_NET)
    [container] = containers_of(docker_client, ws_id)
    host_config = container.attrs["HostConfig"]
    assert (host_config["NanoCpus"], host_config["Memory"]) == (0, 0)
    # The engine reports no free space: said once, not silently skipped.
    storage = [w for w in result.json["warnings"] if "hostRequirements.storage" in w]
    assert storage == ["hostRequirements.storage is not checked: the Docker engine does not report its free space"]
    assert "hostRequirements.storage is not checked" in result.stderr.decode()
    # The guest sees every CPU of the machine.
    nproc = devsy.run("exec", ws_id, "--", "nproc").stdout.strip()
    assert int(nproc) == docker_client.info()["NCPU"]


def test_the_docker_driver_itself_refuses_an_unmet_minimum_before_creating_anything(guest_image, docker_client):
    # The check every caller of the driver gets (devsy-provider-docker serves this same driver over the protocol).
    ws = f"t-min-{secrets.token_hex(4)}"
    options = RunOptions(image=guest_image, host_requirements=HostRequirements(cpus=128))
    with pytest.raises(ConfigError, match='"hostRequirements.cpus": the devcontainer needs 128 CPUs'):
        DockerDriver().run(ws, options)
    assert containers_of(docker_client, ws) == []
