"""Each misbehaviour of the fake runtime reaches the host as the expected typed error (or result)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from devsy.driver.base import ExecRequest, RunOptions
from devsy.errors import AlreadyExists, NotFound
from devsy.runtime.wire.errors import IncompatibleVersion, InvalidProviderInfo, PreconditionFailed, RuntimeFailure, \
    RuntimeTimeout
from devsy.runtime.fake.modes import NONZERO_EXIT_CODE
from devsy.runtime.host.testing import fake_command, running


def _exec(client, argv: list[str], stdin: bytes = b"", timeout: float | None = None):
    out, err = io.BytesIO(), io.BytesIO()
    result = client.exec("ws", ExecRequest(argv=argv, stdout=out, stderr=err, stdin=io.BytesIO(stdin)), timeout)
    return result, out.getvalue(), err.getvalue()


def _with_workspace(tmp_path: Path, mode: str):
    """Create the workspace with a well-behaved process, then serve the same state in `mode`."""
    with running(fake_command(tmp_path)) as p:
        p.client.run_image("ws", RunOptions(image="img", remote_user="dev"))
    return running(fake_command(tmp_path, "--mode", mode))


def test_incompatible_version(tmp_path: Path) -> None:
    with running(fake_command(tmp_path, "--mode", "incompatible-version")) as p, \
            pytest.raises(IncompatibleVersion, match="install a runtime that speaks major 1"):
        p.client.info()


def test_malformed_info(tmp_path: Path) -> None:
    with running(fake_command(tmp_path, "--mode", "malformed-info")) as p, \
            pytest.raises(InvalidProviderInfo, match="driver_name"):
        p.client.info()


def test_failing_preflight(tmp_path: Path) -> None:
    with running(fake_command(tmp_path, "--mode", "failing-preflight")) as p, \
            pytest.raises(PreconditionFailed, match="preflight fails on purpose") as info:
        p.client.preflight()
    assert info.value.hint  # the provider's hint travels in the RuntimeError details


def test_failing_run_changes_nothing(tmp_path: Path) -> None:
    with running(fake_command(tmp_path, "--mode", "failing-run")) as p:
        with pytest.raises(RuntimeFailure, match="fails RunImage on purpose"):
            p.client.run_image("ws", RunOptions(image="img"))
        assert p.client.find("ws") is None


def test_exec_slow_ends_with_a_timeout_and_the_workspace_keeps_running(tmp_path: Path) -> None:
    with _with_workspace(tmp_path, "exec-slow") as p:
        with pytest.raises(RuntimeTimeout):
            _exec(p.client, ["cat"], timeout=1.0)
        assert p.client.find("ws").running


def test_nonzero_exit_is_a_result_not_an_error(tmp_path: Path) -> None:
    with _with_workspace(tmp_path, "nonzero-exit") as p:
        result, _, err = _exec(p.client, ["true"])
    assert (result.exit_code, result.signal) == (NONZERO_EXIT_CODE, "")
    assert b"failing on purpose" in err


def test_signal_exit_is_a_result_with_the_signal(tmp_path: Path) -> None:
    with _with_workspace(tmp_path, "signal-exit") as p:
        result, _, _ = _exec(p.client, ["true"])
    assert result.signal == "SIGKILL" and result.exit_code != 0


def test_lifecycle_errors_are_typed(tmp_path: Path) -> None:
    with running(fake_command(tmp_path)) as p:
        with pytest.raises(NotFound):
            p.client.start("ws")
        p.client.run_image("ws", RunOptions(image="img"))
        with pytest.raises(AlreadyExists):
            p.client.run_image("ws", RunOptions(image="img"))
        result, out, _ = _exec(p.client, ["cat"], b"\x00\xff")
        assert (result.exit_code, out) == (0, b"\x00\xff")


def test_a_fresh_provider_process_sees_the_same_workspaces(tmp_path: Path) -> None:
    with running(fake_command(tmp_path)) as p:
        p.client.run_image("ws", RunOptions(image="img"))
        created = p.client.find("ws")
    with running(fake_command(tmp_path)) as p:
        assert p.client.find("ws").id == created.id
    assert len(list(tmp_path.glob("*.json"))) == 1 and not list(tmp_path.glob(".tmp-*"))
