"""devsy-provider-docker checks hostRequirements as minimums behind the protocol too: a memory size the protocol
carries (uint64) beyond the engine's machine is refused naming the field before anything is created (it used to become
a memory limit, and the engine's own answer for one above int64 was an unmarshalling 500)."""

from __future__ import annotations

import secrets

import pytest

from devsy.driver.base import HostRequirements, RunOptions
from devsy.errors import DevsyError
from devsy.runtime.host.testing import docker_command, running

pytestmark = pytest.mark.usefixtures("guest_image")


def test_more_memory_than_the_engine_has_is_refused_over_the_protocol(guest_image: str, docker_client) -> None:
    ws = f"t-mem-{secrets.token_hex(4)}"
    options = RunOptions(image=guest_image, remote_user="root",
                         host_requirements=HostRequirements(memory_bytes=2**63))
    with running(docker_command()) as provider:  # the real devsy-provider-docker behind the protocol
        with pytest.raises(DevsyError) as caught:
            provider.client.run_image(ws, options)
    assert '"hostRequirements.memory": the devcontainer needs 8589934592.0 GiB (9223372036854775808 bytes), ' \
        "this Docker engine has" in str(caught.value)
    assert "unmarshal" not in str(caught.value)
    assert docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={ws}"}) == []
