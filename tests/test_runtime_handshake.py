"""The go-plugin handshake, both sides, with real processes: the provider's refusals and its one stdout line, and
the host's typed errors for every way a launch can go wrong."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devsy.runtime.wire.constants import COOKIE_KEY, COOKIE_VALUE, NOT_A_PLUGIN_MESSAGE
from devsy.runtime.wire.errors import CookieRejected, HandshakeError, HandshakeTimeout, ProviderExited, \
    ProviderLaunchError, ProviderUnavailable
from devsy.runtime.goplugin import grpc_controller_pb2, grpc_controller_pb2_grpc
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.plugin_client import HandshakeConfig, LaunchOptions, PluginClient
from devsy.runtime.host.testing import fake_command, script

FAKE = script("devsy-fake-runtime")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != COOKIE_KEY and not k.startswith("PLUGIN_")}
    return {**env, **extra}


@pytest.mark.parametrize("env", [{}, {COOKIE_KEY: "someone-else"}],
                         ids=["no cookie", "wrong cookie"])
def test_provider_refuses_to_serve_without_the_cookie(tmp_path: Path, env: dict[str, str]) -> None:
    proc = subprocess.run([FAKE, "serve", "--state-dir", str(tmp_path)], env=_env(**env), capture_output=True,
                          timeout=30)
    assert proc.returncode == 1
    assert proc.stdout == b""
    assert NOT_A_PLUGIN_MESSAGE in proc.stderr.decode()


def test_provider_refuses_a_host_that_accepts_no_version_it_speaks(tmp_path: Path) -> None:
    proc = subprocess.run([FAKE, "serve", "--state-dir", str(tmp_path)], capture_output=True, timeout=30,
                          env=_env(**{COOKIE_KEY: COOKIE_VALUE, "PLUGIN_PROTOCOL_VERSIONS": "2,3"}))
    assert (proc.returncode, proc.stdout) == (1, b"")
    assert "Incompatible API version" in proc.stderr.decode()


def test_provider_prints_one_line_serves_health_ignores_sigint_and_shuts_down_cleanly(tmp_path: Path) -> None:
    socket_dir = tmp_path / "sockets"
    socket_dir.mkdir()
    env = _env(**{COOKIE_KEY: COOKIE_VALUE, "PLUGIN_PROTOCOL_VERSIONS": "1", "PLUGIN_UNIX_SOCKET_DIR": str(socket_dir)})
    proc = subprocess.Popen([FAKE, "serve", "--state-dir", str(tmp_path / "state")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline().decode()
        core, app, network, address, protocol, cert = line.rstrip("\n").split("|")
        assert (core, app, network, protocol, cert) == ("1", "1", "unix", "grpc", "")
        assert Path(address).parent.parent == socket_dir
        with grpc.insecure_channel(f"unix:{address}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            check = health_pb2.HealthCheckRequest(service="plugin")
            assert health.Check(check, timeout=10).status == health_pb2.HealthCheckResponse.SERVING
            proc.send_signal(signal.SIGINT)
            assert health.Check(check, timeout=10).status == health_pb2.HealthCheckResponse.SERVING
            grpc_controller_pb2_grpc.GRPCControllerStub(channel).Shutdown(grpc_controller_pb2.Empty(), timeout=10)
        assert proc.wait(timeout=15) == 0
        assert proc.stdout.read() == b"", "the provider wrote to stdout after its handshake line"
        assert not Path(address).parent.exists(), "the socket directory was left behind"
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_host_reports_a_cookie_the_provider_rejects(tmp_path: Path) -> None:
    options = LaunchOptions(handshake=HandshakeConfig(cookie_value="devsy-runtime-v0"))
    with pytest.raises(CookieRejected, match="magic cookie") as info:
        PluginClient.launch(fake_command(tmp_path), options)
    assert NOT_A_PLUGIN_MESSAGE in info.value.message  # the provider's own words, from its stderr tail


def test_host_reports_a_bad_handshake_line(tmp_path: Path) -> None:
    with pytest.raises(HandshakeError, match="unrecognised handshake line"):
        PluginClient.launch(fake_command(tmp_path, "--mode", "bad-handshake-line"))


def test_host_reports_a_crash_before_the_handshake_with_the_stderr_tail(tmp_path: Path) -> None:
    with pytest.raises(ProviderExited) as info:
        PluginClient.launch(fake_command(tmp_path, "--mode", "crash-before-handshake"))
    assert "exited before completing the handshake" in info.value.message
    assert "crashing before the handshake on purpose" in info.value.message


def test_host_gives_up_on_a_slow_handshake_in_bounded_time(tmp_path: Path) -> None:
    with pytest.raises(HandshakeTimeout, match="within 1.5s"):
        PluginClient.launch(fake_command(tmp_path, "--mode", "slow-handshake"), LaunchOptions(handshake_timeout=1.5))


def test_host_reports_a_provider_that_dies_right_after_its_handshake(tmp_path: Path) -> None:
    with pytest.raises(ProviderUnavailable, match="health check"):
        PluginClient.launch(fake_command(tmp_path, "--mode", "crash-after-handshake"))


def test_host_reports_a_missing_provider_executable(tmp_path: Path) -> None:
    with pytest.raises(ProviderLaunchError, match="not found"):
        PluginClient.launch(ProviderCommand(binary=str(tmp_path / "no-such-provider")))
