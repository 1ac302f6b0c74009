"""devsy-provider-docker against the real engine: the behaviours conformance cannot see from outside."""

from __future__ import annotations

import io
import secrets
import threading
import time
from collections.abc import Iterator

import pytest

from devsy.driver.base import ExecRequest, Mount, MountType, RunOptions
from devsy.driver.docker.options import OPTION_HELP
from devsy.errors import RecreateRequired
from devsy.redaction import MASK
from devsy.runtime.wire.errors import ProviderExited
from devsy.runtime.host.plugin_client import PluginClient
from devsy.runtime.host.testing import RunningProvider, docker_command, running

pytestmark = pytest.mark.usefixtures("guest_image")

KEEP_ALIVE = ["/bin/sh"], ["-c", 'trap "exit 0" TERM; while sleep 1000 & wait $!; do :; done']


@pytest.fixture
def provider() -> Iterator[RunningProvider]:
    with running(docker_command()) as p:
        yield p


@pytest.fixture
def workspace(provider: RunningProvider, guest_image: str, docker_client) -> Iterator[str]:
    ws = f"t-rt-{secrets.token_hex(4)}"
    entrypoint, cmd = KEEP_ALIVE
    provider.client.run_image(ws, RunOptions(image=guest_image, remote_user="dev", entrypoint=entrypoint, cmd=cmd))
    yield ws
    for container in docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={ws}"}):
        container.remove(force=True, v=True)


def _processes(provider: RunningProvider, ws: str) -> bytes:
    out = io.BytesIO()
    script = 'for p in /proc/[0-9]*; do tr "\\000" " " < $p/cmdline; echo; done'
    assert provider.client.exec(ws, ExecRequest(argv=["sh", "-c", script], stdout=out, stderr=io.BytesIO())) \
        .exit_code == 0
    return out.getvalue()


def test_cancel_kills_the_commands_tree_and_keeps_the_workspace(provider: RunningProvider, workspace: str) -> None:
    started = threading.Event()

    class Watch(io.RawIOBase):
        def write(self, data) -> int:
            started.set()
            return len(data)

    request = ExecRequest(argv=["sh", "-c", "sleep 2345 & echo ready; sleep 2346"], stdout=Watch(),
                          stderr=io.BytesIO(), stdin=io.BytesIO())
    threading.Thread(target=lambda: started.wait(60) and request.cancel.cancel(), daemon=True).start()
    result = provider.client.exec(workspace, request, timeout=120)
    assert started.is_set() and result.exit_code == 130  # we cancelled it ourselves
    # The RPC ends at once on the host; the provider reaps the tree right after, asynchronously: bounded wait.
    deadline = time.monotonic() + 10
    while b"sleep 234" in (left := _processes(provider, workspace)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert b"sleep 2345" not in left and b"sleep 2346" not in left, left.decode()
    assert provider.client.find(workspace).running


def test_reuse_preflight_refuses_another_identity(provider: RunningProvider, workspace: str) -> None:
    provider.client.reuse_preflight(workspace, "dev")
    with pytest.raises(RecreateRequired, match="--recreate"):
        provider.client.reuse_preflight(workspace, "alt")


def test_on_run_replaces_only_with_permission(provider: RunningProvider, workspace: str, guest_image: str) -> None:
    assert provider.client.info(opt_in_on_run=True).recreate_on_run
    assert provider.client.info(opt_in_on_run=False).recreate_mode == "delete"
    old = provider.client.find(workspace)
    entrypoint, cmd = KEEP_ALIVE
    options = RunOptions(image=guest_image, remote_user="dev", entrypoint=entrypoint, cmd=cmd, allow_recreate=True)
    provider.client.run_image(workspace, options)
    new = provider.client.find(workspace)
    assert new.running and new.id != old.id


def test_mount_sources_in_backend_errors_are_redacted(provider: RunningProvider, guest_image: str,
                                                      docker_client) -> None:
    ws = f"t-rt-{secrets.token_hex(4)}"
    # A volume name the engine refuses and quotes (a missing bind source is refused before the engine, by target).
    secret_path = f"nonexistent/secret-{secrets.token_hex(6)}"
    options = RunOptions(image=guest_image, mounts=[Mount(MountType.VOLUME, "/data", secret_path)])
    try:
        with pytest.raises(Exception) as info:
            provider.client.run_image(ws, options)
        text = str(info.value) + getattr(info.value, "runtime_message", "")
        assert secret_path not in text and secret_path.rsplit("/", 1)[1] not in text
        assert MASK in text  # the engine did name the path: it was removed, not absent
        assert secret_path not in provider.plugin.provider.stderr_tail()
    finally:
        for container in docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={ws}"}):
            container.remove(force=True, v=True)


def test_provider_options_come_from_the_environment(provider: RunningProvider, workspace: str,
                                                    docker_client) -> None:
    (container,) = docker_client.containers.list(filters={"label": f"dev.devsy.workspace={workspace}"})
    assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    assert set(OPTION_HELP) == {"NETWORK_MODE", "STOP_TIMEOUT"}  # the documented env names


def test_an_invalid_provider_option_stops_the_provider_with_its_message() -> None:
    command = docker_command(network_mode="sideways")
    with pytest.raises(ProviderExited, match="NETWORK_MODE"):
        PluginClient.launch(command)


def test_a_replacement_the_engine_rejects_leaves_the_workspace_untouched(provider: RunningProvider, workspace: str,
                                                                        guest_image: str, docker_client) -> None:
    old = provider.client.find(workspace)
    entrypoint, cmd = KEEP_ALIVE
    # A security option the engine does not know: it refuses the create (a missing bind source is refused before
    # it, and hostRequirements are minimums the driver checks before anything).
    options = RunOptions(image=guest_image, entrypoint=entrypoint, cmd=cmd, allow_recreate=True,
                         security_opt=["no-such-option=1"])
    with pytest.raises(Exception, match="creating the container"):
        provider.client.run_image(workspace, options)
    now = provider.client.find(workspace)
    assert (now.id, now.running) == (old.id, True)
    names = [c.name for c in docker_client.containers.list(all=True,
                                                          filters={"label": f"dev.devsy.workspace={workspace}"})]
    assert names == [f"devsy-{workspace}"], "the rejected replacement left a container behind"
