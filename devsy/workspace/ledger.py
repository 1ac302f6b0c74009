"""The attempt ledger: undo exactly what this attempt created, newest first, whatever fails along the way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from devsy.errors import DevsyError


@dataclass(frozen=True)
class _Entry:
    description: str  # neutral wording only: it can end up in an error message
    undo: Callable[[], None]


class AttemptLedger:
    """Registry of undo steps for things created during one attempt (csi-sanity style cleanup)."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []

    def add(self, description: str, undo: Callable[[], None]) -> None:
        """Register the undo of something the moment it has been created."""
        self._entries.append(_Entry(description, undo))

    def descriptions(self) -> list[str]:
        """What would be undone, in registration order."""
        return [entry.description for entry in self._entries]

    def commit(self) -> None:
        """The attempt succeeded: keep everything it created."""
        self._entries.clear()

    def rollback(self) -> list[str]:
        """Run every undo, newest first, continuing past failures; return `"<description>: <error>"` per failure."""
        errors: list[str] = []
        while self._entries:
            # Popped before running: an undo is tried once, and a second Ctrl-C leaves the rest registered.
            entry = self._entries.pop()
            try:
                entry.undo()
            except Exception as exc:  # each undo is independent; the others must still run
                errors.append(f"{entry.description}: {_describe(exc)}")
        return errors

    def __enter__(self) -> AttemptLedger:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.commit()
            return
        errors = self.rollback()
        if errors:
            note = "cleanup of this attempt failed for:\n" + "\n".join(f"  {error}" for error in errors)
            exc.add_note(note)
            if isinstance(exc, DevsyError):
                exc.message += "\n" + note  # the CLI prints a DevsyError's message and hint, not its notes
        # Returning None re-raises the original exception.


def _describe(exc: Exception) -> str:
    text = exc.message if isinstance(exc, DevsyError) else str(exc)
    return text or type(exc).__name__
