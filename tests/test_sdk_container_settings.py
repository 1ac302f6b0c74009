"""The provider SDK passes capAdd, securityOpt, privileged, init and a required GPU only to a driver that acts on
them (Capabilities.container_settings); any other driver would ignore them silently, so the SDK refuses them."""

from __future__ import annotations

import pytest

from devsy.driver.base import Capabilities
from devsy.runtime.sdk.validate import run_request
from devsy.runtime.v1 import runtime_pb2 as pb
from devsy.runtime.wire.errors import InvalidArgument, Unsupported

SETTINGS = {
    "capAdd": {"cap_add": ["NET_ADMIN"]},
    "securityOpt": {"security_opt": ["no-new-privileges:true"]},
    "privileged": {"privileged": True},
    "init": {"init": True},
    "gpu": {"host_requirements": pb.HostRequirements(
        gpu=pb.GpuRequirement(value=pb.GPU_REQUIRED))},
}


def _request(**fields: object) -> pb.RunImageRequest:
    return pb.RunImageRequest(workspace_id="ws-1", image="img", **fields)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_a_driver_that_ignores_container_settings_gets_them_refused(name: str) -> None:
    with pytest.raises(Unsupported, match="does not support"):
        run_request(_request(**SETTINGS[name]), Capabilities(), lambda: "amd64")


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_a_driver_that_acts_on_them_receives_them(name: str) -> None:
    options = run_request(_request(**SETTINGS[name]), Capabilities(container_settings=True), lambda: "amd64")
    assert options.image == "img"


def test_settings_that_ask_for_nothing_pass_every_driver() -> None:
    run_request(_request(privileged=False, init=False), Capabilities(), lambda: "amd64")


def test_an_unknown_gpu_value_is_refused_not_read_as_unset() -> None:
    future = _request(host_requirements=pb.HostRequirements(gpu=pb.GpuRequirement(value=7)))
    with pytest.raises(InvalidArgument, match="unknown value 7"):
        run_request(future, Capabilities(container_settings=True), lambda: "amd64")
