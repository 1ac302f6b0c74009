"""Agent delivery with a stall timeout, in a real container (the Docker driver): a guest `cat` that is stopped
(SIGSTOP) reads nothing, so the transfer makes no progress; after the stall timeout that attempt is cancelled as a
DeliveryStalled failure and retried with a fresh source, and the retry succeeds."""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
from pathlib import Path

import pytest

from devsy.agent.artifact import AgentArtifact
from devsy.agent.delivery import STALL_ENV, Delivered, DeliveryStalled, StreamDelivery, guest_agent_path
from devsy.agent.delivery_fault import TRACE_ENV
from devsy.agent.errors import AgentError
from devsy.bounded_wait import poll_until
from devsy.driver.base import CancelToken
from devsy.driver.docker.driver import DockerDriver

pytestmark = pytest.mark.docker
# The first `cat` of delivery's install script stops itself (SIGSTOP) before reading a byte; every other cat (later
# attempts, the driver's own kill helper) is the real one.
STOPPING_CAT = """#!/bin/sh
if grep -qa devsy-install /proc/$PPID/cmdline && mkdir /tmp/devsy-test-stalled-once 2>/dev/null; then kill -STOP $$; fi
exec /bin/cat "$@"
"""
ALWAYS_STOPPING_CAT = """#!/bin/sh
grep -qa devsy-install /proc/$PPID/cmdline && kill -STOP $$
exec /bin/cat "$@"
"""


DEADLINE_S = 120.0  # far beyond the stall timeouts below: only a delivery that never gives up reaches it


def _deliver(delivery: StreamDelivery, workspace: str, artifact: AgentArtifact, open_source=None) -> Delivered:
    """Deliver, bounded: a delivery still running at the deadline is cancelled and the test fails."""
    cancel, outcome = CancelToken(), []

    def run() -> None:
        try:
            outcome.append(delivery.deliver(DockerDriver(), workspace, artifact, cancel, open_source))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=run, name="test-delivery")
    worker.start()
    worker.join(DEADLINE_S)
    if worker.is_alive():
        cancel.cancel()
        worker.join(DEADLINE_S)
        pytest.fail(f"delivery was still running after {DEADLINE_S:g} s (cancelled)")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _container(docker_client, workspace: str):
    return docker_client.containers.list(filters={"label": f"dev.devsy.workspace={workspace}"})[0]


def _sh(container, script: str) -> str:
    result = container.exec_run(["sh", "-c", script], user="0")
    assert result.exit_code == 0, result.output
    return result.output.decode()


@pytest.fixture
def artifact(tmp_path: Path) -> AgentArtifact:
    path = tmp_path / "agent.pyz"
    path.write_bytes(os.urandom(3 * 1024 * 1024))  # more than the pipes between here and the guest hold
    return AgentArtifact(path, hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_size, "test")


def test_a_stalled_transfer_is_cancelled_and_retried_with_a_fresh_source(running_workspace, docker_client,
                                                                        artifact, tmp_path, monkeypatch) -> None:
    container = _container(docker_client, running_workspace)
    _sh(container, f"cat > /usr/local/bin/cat <<'EOF'\n{STOPPING_CAT}EOF\nchmod 0755 /usr/local/bin/cat")
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv(TRACE_ENV, str(trace))

    delivered = _deliver(StreamDelivery(backoff_s=0.1, stall_timeout_s=15), running_workspace, artifact)

    assert (delivered.transferred, delivered.attempts) == (True, 2)
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    failed = [e for e in events if e["event"] == "failed"]
    assert len(failed) == 1 and failed[0]["stalled"] and "no progress for 15 s" in failed[0]["error"], failed
    opened = [e["source"] for e in events if e["event"] == "open"]
    closed = [e["source"] for e in events if e["event"] == "close"]
    assert opened == closed == [1, 2]  # a fresh source for the retry, each closed once
    assert _sh(container, f"sha256sum {guest_agent_path(artifact.sha256)}").split()[0] == artifact.sha256
    # The stopped cat was ended with its cancelled exec, not left stopped in the guest.
    poll_until(lambda: _sh(container, "ps -eo stat=,args= | grep '[/]usr/local/bin/cat' || true"),
               lambda left: left == "", timeout=60, interval=0.2, what="the stopped guest cat ending")


def test_every_attempt_stalling_is_a_typed_failure(running_workspace, docker_client, artifact) -> None:
    container = _container(docker_client, running_workspace)
    _sh(container, f"cat > /usr/local/bin/cat <<'EOF'\n{ALWAYS_STOPPING_CAT}EOF\nchmod 0755 /usr/local/bin/cat")
    try:
        with pytest.raises(DeliveryStalled, match="failed 2 times; last error: the transfer made no progress"):
            _deliver(StreamDelivery(attempts=2, backoff_s=0.1, stall_timeout_s=2), running_workspace, artifact)
    finally:
        _sh(container, "rm -f /usr/local/bin/cat")


def test_the_stall_timeout_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(STALL_ENV, "7.5")
    assert StreamDelivery().stall_timeout_s == 7.5
    monkeypatch.setenv(STALL_ENV, "soon")
    with pytest.raises(AgentError, match=STALL_ENV):
        StreamDelivery()


def test_an_attempt_that_keeps_trickling_is_still_bounded(running_workspace, artifact) -> None:
    class Trickle(io.RawIOBase):
        """A source that always has one more byte, slowly: progress, but no end."""

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:  # type: ignore[override]
            threading.Event().wait(0.2)  # the source's pace, not synchronization
            buffer[:1] = b"x"
            return 1

    delivery = StreamDelivery(attempts=1, stall_timeout_s=30, attempt_timeout_s=3)
    with pytest.raises(DeliveryStalled, match="did not finish within 3 s"):
        _deliver(delivery, running_workspace, artifact, Trickle)
