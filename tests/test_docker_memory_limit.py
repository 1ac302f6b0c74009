"""A memory size the protocol carries (uint64) but the engine cannot set (its limit is an int64) is refused with an
error naming the field, before anything is created; the engine's own answer is an unmarshalling 500."""

from __future__ import annotations

import secrets

import pytest

from devsy.driver.base import HostRequirements, RunOptions
from devsy.errors import DevsyError
from devsy.runtime.host.testing import docker_command, running

pytestmark = pytest.mark.usefixtures("guest_image")


def test_a_memory_size_above_the_engines_int64_is_refused_naming_the_field(guest_image: str, docker_client) -> None:
    ws = f"t-mem-{secrets.token_hex(4)}"
    options = RunOptions(image=guest_image, remote_user="root",
                         host_requirements=HostRequirements(memory_bytes=2**63))
    with running(docker_command()) as provider:  # the real devsy-provider-docker behind the protocol
        with pytest.raises(DevsyError) as caught:
            provider.client.run_image(ws, options)
    assert '"hostRequirements.memory" (9223372036854775808 bytes) is more than this Docker engine can set' \
        in str(caught.value)
    assert "unmarshal" not in str(caught.value)
    assert docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={ws}"}) == []
