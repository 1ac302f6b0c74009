from __future__ import annotations

import pytest

from devsy.errors import DriverError
from devsy.workspace.ledger import AttemptLedger


def test_rollback_runs_undos_newest_first() -> None:
    ledger = AttemptLedger()
    done: list[str] = []
    for name in ("record", "content", "container"):
        ledger.add(f"remove {name}", lambda name=name: done.append(name))
    assert ledger.rollback() == []
    assert done == ["container", "content", "record"]
    assert ledger.rollback() == []  # nothing left to undo twice
    assert done == ["container", "content", "record"]


def test_a_failing_undo_does_not_stop_the_others() -> None:
    ledger = AttemptLedger()
    done: list[str] = []
    ledger.add("remove record", lambda: done.append("record"))
    ledger.add("remove container", _raise(DriverError("daemon went away", "start docker")))
    ledger.add("remove ssh block", _raise(OSError("read-only file system")))
    ledger.add("remove content", lambda: done.append("content"))
    errors = ledger.rollback()
    assert done == ["content", "record"]
    assert errors == ["remove ssh block: read-only file system", "remove container: daemon went away"]


def test_commit_forgets_undos() -> None:
    ledger = AttemptLedger()
    done: list[str] = []
    ledger.add("remove record", lambda: done.append("record"))
    ledger.commit()
    assert ledger.rollback() == [] and done == []


def test_context_manager_rolls_back_and_notes_undo_errors_on_the_original_exception() -> None:
    done: list[str] = []
    original = RuntimeError("agent delivery failed")
    with pytest.raises(RuntimeError) as info:
        with AttemptLedger() as ledger:
            ledger.add("remove record", lambda: done.append("record"))
            ledger.add("remove container", _raise(DriverError("still running")))
            raise original
    assert info.value is original
    assert done == ["record"]
    assert info.value.__notes__ == ["cleanup of this attempt failed for:\n  remove container: still running"]


def test_context_manager_without_undo_errors_adds_no_note() -> None:
    with pytest.raises(KeyboardInterrupt) as info:
        with AttemptLedger() as ledger:
            ledger.add("remove record", lambda: None)
            raise KeyboardInterrupt
    assert not getattr(info.value, "__notes__", None)


def test_context_manager_commits_on_success() -> None:
    done: list[str] = []
    with AttemptLedger() as ledger:
        ledger.add("remove record", lambda: done.append("record"))
    assert done == [] and ledger.descriptions() == []


def _raise(exc: BaseException):
    def undo() -> None:
        raise exc

    return undo
