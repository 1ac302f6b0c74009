"""The test-only delivery fault hook: inert unless set; cuts only the first source short; traces every open/close."""

from __future__ import annotations

import io
import json

import pytest

from devsy.agent.delivery_fault import FAULT_ENV, TRACE_ENV, DeliveryTrace, instrument
from devsy.agent.errors import AgentError

DATA = bytes(range(256)) * 40


def _events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_without_the_variables_the_opener_is_untouched(monkeypatch):
    monkeypatch.delenv(FAULT_ENV, raising=False)
    monkeypatch.delenv(TRACE_ENV, raising=False)

    def opener():
        return io.BytesIO(DATA)

    assert instrument(opener, len(DATA), DeliveryTrace.from_env()) is opener


def test_interrupt_first_cuts_only_the_first_source_and_traces_each_close(monkeypatch, tmp_path):
    trace_file = tmp_path / "trace.jsonl"
    monkeypatch.setenv(FAULT_ENV, "interrupt-first")
    monkeypatch.setenv(TRACE_ENV, str(trace_file))
    opener = instrument(lambda: io.BytesIO(DATA), len(DATA), DeliveryTrace.from_env())

    first = opener()
    assert first.read() == DATA[: len(DATA) // 2]
    first.close()
    second = opener()
    assert second.read() == DATA
    second.close()
    second.close()  # a double close must be visible in the trace

    events = _events(trace_file)
    assert [e["event"] for e in events] == ["open", "interrupt", "close", "open", "close", "close"]
    assert [e["source"] for e in events if e["event"] == "close"] == [1, 2, 2]
    assert [e["bytes_read"] for e in events if e["event"] == "close"] == [len(DATA) // 2, len(DATA), len(DATA)]


def test_an_unknown_fault_is_refused(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "interrupt-everything")
    with pytest.raises(AgentError, match="not a known fault"):
        instrument(lambda: io.BytesIO(DATA), len(DATA), DeliveryTrace())
