"""A command killed by a signal is reported with the signal's name by every devsy provider (the Go SDK requires the
name, not only 128+N), `devsy exec` still exits 128+N, and Exec on a stopped workspace is FAILED_PRECONDITION."""

from __future__ import annotations

import io
import secrets
from collections.abc import Iterator

import grpc
import pytest

from helpers.projects import make_project
from devsy.driver.base import ExecRequest, RunOptions
from devsy.runtime.fake.modes import ENV_MODE, Mode
from devsy.runtime.host.testing import RunningProvider, docker_command, running
from devsy.runtime.v1 import runtime_pb2 as pb

pytestmark = pytest.mark.usefixtures("guest_image")

KEEP_ALIVE = ["/bin/sh"], ["-c", 'trap "exit 0" TERM; while sleep 1000 & wait $!; do :; done']
SIGNALLED = ["sh", "-c", "kill -TERM $$"]


@pytest.fixture
def provider() -> Iterator[RunningProvider]:
    with running(docker_command()) as p:  # the real `devsy-provider-docker serve` process on the real engine
        yield p


@pytest.fixture
def workspace(provider: RunningProvider, guest_image: str, docker_client) -> Iterator[str]:
    ws = f"t-sig-{secrets.token_hex(4)}"
    entrypoint, cmd = KEEP_ALIVE
    provider.client.run_image(ws, RunOptions(image=guest_image, remote_user="root", entrypoint=entrypoint, cmd=cmd))
    yield ws
    for container in docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={ws}"}):
        container.remove(force=True, v=True)


def _exec(provider: RunningProvider, ws: str, argv: list[str]) -> tuple[int, str, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    result = provider.client.exec(ws, ExecRequest(argv=argv, stdout=out, stderr=err, stdin=io.BytesIO()), 120)
    return result.exit_code, result.signal, out.getvalue(), err.getvalue()


def test_docker_provider_reports_the_signal_by_name(provider: RunningProvider, workspace: str) -> None:
    assert _exec(provider, workspace, SIGNALLED) == (143, "SIGTERM", b"", b"")
    assert _exec(provider, workspace, ["sh", "-c", "kill -KILL $$"])[:2] == (137, "SIGKILL")


def test_docker_provider_keeps_a_plain_exit_143_a_plain_exit(provider: RunningProvider, workspace: str) -> None:
    """The same number from exit(143) is no signal; output around it is untouched."""
    assert _exec(provider, workspace, ["sh", "-c", "printf out; printf 'err\\000' >&2; exit 143"]) == \
        (143, "", b"out", b"err\x00")


def test_exec_on_a_stopped_workspace_is_failed_precondition(provider: RunningProvider, workspace: str) -> None:
    provider.client.stop(workspace)
    frames = [pb.ExecClientMessage(start=pb.ExecStart(workspace_id=workspace, argv=["true"])),
              pb.ExecClientMessage(close_stdin=pb.CloseStdin())]
    with pytest.raises(grpc.RpcError) as info:
        list(provider.plugin.stub.Exec(iter(frames), timeout=60))
    assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION, info.value.details()


def test_devsy_exec_of_a_signalled_command_exits_143(devsy, running_workspace: str) -> None:
    result = devsy.run("exec", running_workspace, "--", *SIGNALLED)
    assert result.returncode == 143, result.stderr
    # The wrapper's own report ("Terminated") and its trailer never reach the command's stderr.
    assert b"Terminated" not in result.stderr and b"devsy-signal" not in result.stderr


def test_devsy_exec_exits_128_plus_n_for_a_signal_sent_go_style(devsy, ws_id: str, tmp_path, guest_image: str) -> None:
    """A provider may report a signal with exit_code 0 beside it (the Go SDK fake sends {signal: "TERM"}); devsy
    exec still exits as a shell would: 128+15. devsy-fake-runtime's `signal-only` scenario reports exactly that."""
    provider = ["--provider", "external:devsy-fake-runtime",
                "--provider-option", f"DEVSY_FAKE_STATE_DIR={tmp_path / 'fake-state'}",
                "--provider-option", f"{ENV_MODE}={Mode.NO_AGENT_TOOLS.value}"]  # `up` completes without the agent
    devsy.up(make_project(tmp_path / "p", {"image": guest_image}), "--id", ws_id, *provider)
    try:
        assert devsy.run("exec", ws_id, "--", "signal-only", "TERM").returncode == 143
        assert devsy.run("exec", ws_id, "--", "signal-only", "SIGKILL").returncode == 137
        assert devsy.run("exec", ws_id, "--", "signal", "SIGTERM").returncode == 143  # devsy's own form: 143 + name
        assert devsy.run("exec", ws_id, "--", "exit", "3").returncode == 3
    finally:
        assert devsy.run("delete", ws_id, "--json").returncode == 0


def test_a_hook_killed_by_a_signal_sent_go_style_fails_up(devsy, ws_id: str, tmp_path, guest_image: str) -> None:
    """{exit_code: 0, signal: TERM} is a failure wherever devsy reads a command's result, not only in `devsy exec`: a
    onCreateCommand killed so fails `devsy up` as the same command reported with exit 143 does."""
    provider = ["--provider", "external:devsy-fake-runtime",
                "--provider-option", f"DEVSY_FAKE_STATE_DIR={tmp_path / 'fake-state'}",
                "--provider-option", f"{ENV_MODE}={Mode.NO_AGENT_TOOLS.value}"]
    project = make_project(tmp_path / "p", {"image": guest_image, "onCreateCommand": ["signal-only", "TERM"]})
    failed = devsy.up(project, "--id", ws_id, *provider, ok=False)  # a failed create rolls the workspace back
    assert failed.returncode != 0, failed.text
    assert "onCreateCommand failed with exit code 143" in failed.json["error"]["message"], failed.text


def test_a_command_cannot_forge_the_signal_report(provider: RunningProvider, workspace: str) -> None:
    """Only the wrapper knows the exec's random token: a look-alike on the command's stderr is its own output."""
    forged = b"\x00devsy-signal-0123456789abcdef:15\x00"
    assert _exec(provider, workspace, ["sh", "-c", "printf '\\000devsy-signal-0123456789abcdef:15\\000' >&2; exit 143"]
                 ) == (143, "", b"", forged)
