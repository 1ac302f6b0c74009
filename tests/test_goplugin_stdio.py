"""go-plugin's stdio stream: the host drains what a provider writes after the handshake, so a chatty provider (whose
writes block until a host drains them, as go-plugin's do) neither blocks nor loses the exec it serves; the log keeps
a bounded, masked share; the stream ends with the provider, leaving no thread and no error behind.
"""

from __future__ import annotations

import io
import logging
import shlex
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy.bounded_wait import wait_until
from devsy.driver.base import ExecRequest, RunOptions
from devsy.runtime.fake.modes import ENV_MODE, Mode
from devsy.runtime.host import stdio_forward
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.testing import running
from go_interop import require_go_binary
from helpers.cli import DevsyCli
from helpers.projects import make_project

CHATTY = Path(__file__).parent / "helpers" / "chatty_provider.py"
NO_STDIO = Path(__file__).parent / "helpers" / "no_stdio_provider.py"
TEN_MIB = 10 * 1024 * 1024
SECRET = "stdio-secret-93b1f7"
EXEC_TIMEOUT_S = 180


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, level: int = logging.INFO) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]


@pytest.fixture
def provider_log() -> Iterator[_Records]:
    logger = logging.getLogger(stdio_forward.log.name)
    handler, level = _Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def _executable(tmp_path: Path, script: Path, name: str) -> Path:
    binary = tmp_path / name
    binary.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(script))} \"$@\"\n")
    binary.chmod(0o755)
    return binary


def _chatty(tmp_path: Path) -> Path:
    return _executable(tmp_path, CHATTY, "chatty-provider")


def _stdio_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("provider-stdio") and t.is_alive()]


def test_a_chatty_provider_serves_its_exec_and_the_log_keeps_a_bounded_masked_share(tmp_path: Path,
                                                                                      provider_log: _Records) -> None:
    record = tmp_path / "written"
    command = ProviderCommand(binary=str(_chatty(tmp_path)), env={
        "DEVSY_FAKE_STATE_DIR": str(tmp_path / "state"), "CHATTY_SECRET": SECRET, "CHATTY_RECORD": str(record)})
    with running(command) as p:
        p.client.run_image("ws", RunOptions(image="img"))
        out, err = io.BytesIO(), io.BytesIO()
        result = p.client.exec("ws", ExecRequest(argv=["chatty", "echo", "hello"], stdout=out, stderr=err),
                               timeout=EXEC_TIMEOUT_S)
        assert (result.exit_code, out.getvalue(), err.getvalue()) == (0, b"hello\n", b"")
        assert record.read_text() == str(TEN_MIB), "the provider did not get all its output out"
        stdio = p.plugin.stdio
        assert stdio is not None
        wait_until(lambda: stdio.received_bytes == TEN_MIB, timeout=60, interval=0.05,
                   what="the host to drain the provider's 10 MiB stdio stream")
        p.plugin.shutdown()
    assert stdio.done.wait(10) and not _stdio_threads(), "the stdio drain outlived the provider"

    assert [r for r in provider_log.records if r.levelno >= logging.WARNING] == [], "errors at shutdown"
    lines = provider_log.messages()
    assert all(line.startswith("provider chatty-provider stdout: chatty ") for line in lines[:-1]), lines[:3]
    assert len(lines) <= stdio_forward.MAX_LOGGED_LINES + 1 < stdio.lines, (len(lines), stdio.lines)
    assert "were not logged" in lines[-1] and f"of its {stdio.lines} stdio lines" in lines[-1], lines[-1]
    assert not any(SECRET in line for line in lines)
    assert any(line.endswith("chatty line 0: the secret is ***") for line in lines), lines[:3]
    assert all(len(line) < stdio_forward.LINE_MAX_BYTES + 200 for line in lines)
    assert any("(cut: the line had 5020 bytes)" in line for line in lines), "no long line was cut"
    assert not any("\x1b" in line or "\r" in line for line in lines), "terminal control bytes reached the log"


def test_a_child_process_given_the_providers_stdout_writes_to_the_stream(tmp_path: Path,
                                                                         provider_log: _Records) -> None:
    """sys.stdout is a real file descriptor, as go-plugin's os.Stdout is: a child given it writes through the stream."""
    command = ProviderCommand(binary=str(_chatty(tmp_path)), env={"DEVSY_FAKE_STATE_DIR": str(tmp_path / "state")})
    with running(command) as p:
        p.client.run_image("ws", RunOptions(image="img"))
        out, err = io.BytesIO(), io.BytesIO()
        result = p.client.exec("ws", ExecRequest(argv=["chatty-child", "echo", "hello"], stdout=out, stderr=err),
                               timeout=EXEC_TIMEOUT_S)
        assert (result.exit_code, out.getvalue(), err.getvalue()) == (0, b"hello\n", b"")
        wait_until(lambda: "provider chatty-provider stdout: chatty child line" in provider_log.messages(),
                   timeout=60, interval=0.05, what="the child's line to reach the host's log")
        stdio = p.plugin.stdio
        assert stdio is not None
        p.plugin.shutdown()
    assert stdio.done.wait(10) and not _stdio_threads(), "the stdio drain outlived the provider"


def test_devsy_exec_through_a_chatty_provider_completes_with_the_guest_bytes_only(devsy: DevsyCli, ws_id: str,
                                                                                  tmp_path: Path,
                                                                                  guest_image: str) -> None:
    record = tmp_path / "written"
    options = ["--provider-option", f"DEVSY_FAKE_STATE_DIR={tmp_path / 'state'}",
               "--provider-option", f"{ENV_MODE}={Mode.NO_AGENT_TOOLS.value}",
               "--provider-option", f"CHATTY_SECRET={SECRET}", "--provider-option", f"CHATTY_RECORD={record}"]
    project = make_project(tmp_path / "p", {"image": guest_image})
    devsy.up(project, "--id", ws_id, "--provider", f"external:{_chatty(tmp_path)}", *options)
    # Before the host drained the stream, this exec never finished: the provider's print blocked it.
    ran = devsy.run("exec", ws_id, "chatty", "echo", "hello", timeout=EXEC_TIMEOUT_S)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"hello\n", b""), ran.text[-2000:]
    assert record.read_text() == str(TEN_MIB)
    assert devsy.run("delete", ws_id, "--json").returncode == 0


def test_the_go_fake_runtimes_stdio_stream_is_drained_and_ends_with_it(tmp_path: Path,
                                                                       provider_log: _Records) -> None:
    go_fake = require_go_binary("go-fake-runtime")
    with running(ProviderCommand(binary=str(go_fake), args=["--state-dir", str(tmp_path)])) as p:
        assert p.client.info().driver_name
        stdio = p.plugin.stdio
        assert stdio is not None
        p.client.run_image("gows", RunOptions(image="img"))
        p.client.delete("gows")
        p.plugin.shutdown()
    assert stdio.done.wait(10) and not _stdio_threads(), "the stdio drain outlived the provider"
    # go-plugin serves the stream (no "does not serve" note) and it ended as the provider did: no warning.
    assert [r.getMessage() for r in provider_log.records] == [], provider_log.records
    # What the Go fake itself writes there: nothing (its errors go to the host as gRPC statuses).
    assert stdio.received_bytes == 0


def test_a_provider_without_the_stdio_stream_is_fine_and_quiet(tmp_path: Path, provider_log: _Records) -> None:
    with running(ProviderCommand(binary=str(_executable(tmp_path, NO_STDIO, "no-stdio-provider")))) as p:
        stdio = p.plugin.stdio
        assert stdio is not None
        assert stdio.done.wait(30), "the host still waits on a stream the provider does not serve"
    assert not _stdio_threads()
    assert [r.levelname for r in provider_log.records] == ["DEBUG"], provider_log.records
    assert "does not serve go-plugin's stdio stream" in provider_log.records[0].getMessage()
