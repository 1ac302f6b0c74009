"""devsy.bounded_wait: a poll returns as soon as the state it watches changes, and a timeout says what and what was
last seen."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from devsy import errors
from devsy.bounded_wait import WaitTimeout, poll_until, wait_until


def test_returns_once_a_real_process_changes_the_state(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    # Another process creates the file once we tell it to (its stdin closes): the wait sees that, not a sleep.
    writer = subprocess.Popen([sys.executable, "-c", f"import sys; sys.stdin.read(); open({str(marker)!r}, 'w')"],
                              stdin=subprocess.PIPE)
    try:
        assert not marker.exists()
        assert writer.stdin is not None
        writer.stdin.close()
        wait_until(marker.exists, timeout=60, interval=0.01, what="the marker file")
        assert marker.exists()
    finally:
        writer.wait(30)


def test_poll_until_returns_the_value_that_satisfied_it() -> None:
    values = iter([0, 1, 2, 3])
    assert poll_until(lambda: next(values), lambda v: v >= 2, timeout=60, interval=0.001, what="a count") == 2


def test_a_timeout_is_typed_and_says_what_and_what_was_last_seen() -> None:
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as caught:
        poll_until(lambda: "still starting", lambda v: v == "ready", timeout=0.2, interval=0.05,
                   what="the fake service's readiness", hint="read its log")
    assert time.monotonic() - started >= 0.2
    assert isinstance(caught.value, errors.DevsyError) and caught.value.kind == "wait-timeout"
    assert caught.value.last == "still starting"
    assert caught.value.message == "the fake service's readiness did not happen within 0.2s; last seen: 'still starting'"
    assert caught.value.hint == "read its log"


def test_the_probe_runs_once_more_at_the_deadline() -> None:
    # A state that turns true during the last pause is still seen: the final probe runs after the deadline.
    calls: list[float] = []

    def probe() -> bool:
        calls.append(time.monotonic())
        return len(calls) >= 2

    wait_until(probe, timeout=0.05, interval=10, what="the second look")
    assert len(calls) == 2


def test_a_long_last_value_is_shortened_in_the_message() -> None:
    with pytest.raises(WaitTimeout) as caught:
        wait_until(lambda: False, timeout=0, interval=0.01, what="nothing")
    assert caught.value.message == "nothing did not happen within 0s; last seen: False"
    with pytest.raises(WaitTimeout) as caught:
        poll_until(lambda: "x" * 10_000, lambda _: False, timeout=0, interval=0.01, what="output")
    assert len(caught.value.message) < 2100 and caught.value.message.endswith("...")
    assert caught.value.last == "x" * 10_000
