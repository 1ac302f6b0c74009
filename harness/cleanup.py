"""The cleanup registry (csi-sanity style, with a budget per step).

A case registers a step the moment it creates something. After the body, whatever its outcome, `run()` executes
the steps in reverse order. Each step runs under its own budget: a Python step runs in a worker thread that is
abandoned at its budget, a command step runs in its own process group that is killed at its budget. Steps are
independent (a failure does not stop the rest), "not found" counts as done, and every error is collected.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import docker.errors

from devsy import errors as devsy_errors
from harness.commands import CommandLog, CompletedCommand, run_bounded, tail

DONE, NOT_FOUND, FAILED, TIMED_OUT, KEPT = "done", "not-found", "failed", "timed-out", "kept"


class NotFound(Exception):
    """Raised by a step whose resource is already gone; the step counts as done."""


# The error types that mean "the resource is already gone", by type (never by a class's name): the harness's own,
# the docker SDK's (ImageNotFound is one), and devsy's (a step that calls devsy's Python API).
NOT_FOUND_TYPES: tuple[type[BaseException], ...] = (
    NotFound, docker.errors.NotFound, devsy_errors.NotFound, devsy_errors.WorkspaceNotFound)


def looks_not_found(exc: BaseException) -> bool:
    """True when a step's error is one of the not-found types: the resource is gone, the step is done."""
    return isinstance(exc, NOT_FOUND_TYPES)


@dataclass
class StepResult:
    name: str
    status: str
    duration: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status in (DONE, NOT_FOUND, KEPT)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "duration": round(self.duration, 3)}


@dataclass
class CleanupStep:
    name: str
    budget: float
    action: Callable[[float], StepResult]


@dataclass
class CleanupRegistry:
    """Steps in registration order; `run()` executes them once, newest first."""

    default_budget: float
    log: CommandLog = field(default_factory=CommandLog)
    steps: list[CleanupStep] = field(default_factory=list)
    results: list[StepResult] = field(default_factory=list)
    kept_reason: str = ""
    _ran: bool = False

    def add(self, name: str, fn: Callable[[], object], budget: float | None = None) -> CleanupStep:
        """Register a Python step; `fn` raises on failure (NotFound-style errors mean already gone)."""
        step_budget = budget or self.default_budget

        def action(limit: float) -> StepResult:
            return _run_in_thread(name, fn, limit)

        return self._append(CleanupStep(name=name, budget=step_budget, action=action))

    def add_command(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        budget: float | None = None,
        not_found: Callable[[CompletedCommand], bool] = lambda completed: False,
    ) -> CleanupStep:
        """Register a subprocess step; it is killed (process group) at its budget."""
        step_budget = budget or self.default_budget

        def action(limit: float) -> StepResult:
            completed = run_bounded(argv, timeout=limit, env=env)
            self.log.add(completed.record(note=f"cleanup step: {name}"))
            if completed.timed_out:
                return StepResult(name, TIMED_OUT, completed.duration, f"killed at its budget of {limit:g}s")
            if completed.exit_code == 0:
                return StepResult(name, DONE, completed.duration)
            if not_found(completed):
                return StepResult(name, NOT_FOUND, completed.duration)
            detail = tail(completed.stderr or completed.stdout, 5)
            return StepResult(name, FAILED, completed.duration, f"exit {completed.exit_code}: {detail}")

        return self._append(CleanupStep(name=name, budget=step_budget, action=action))

    def _append(self, step: CleanupStep) -> CleanupStep:
        if self._ran:
            raise RuntimeError(f"cleanup step {step.name!r} registered after cleanup already ran")
        self.steps.append(step)
        return step

    def keep(self, reason: str) -> None:
        """Keep everything (--devsy-keep-on-failure): steps are recorded as kept instead of run."""
        self.kept_reason = reason

    def run(self) -> list[StepResult]:
        """Run every step newest first, each under its own budget; return all results (also kept in .results)."""
        if self._ran:
            return self.results
        self._ran = True
        for step in reversed(self.steps):
            if self.kept_reason:
                self.results.append(StepResult(step.name, KEPT, 0.0, self.kept_reason))
                continue
            started = time.monotonic()
            try:
                result = step.action(step.budget)
            except Exception as exc:  # a step's own machinery failing must not stop the others
                status = NOT_FOUND if looks_not_found(exc) else FAILED
                result = StepResult(step.name, status, time.monotonic() - started, _describe(exc))
            self.results.append(result)
        return self.results

    def errors(self) -> list[str]:
        """One line per step that did not finish cleanly."""
        return [f"{r.name}: {r.status}: {r.error}" for r in self.results if not r.ok]


def _run_in_thread(name: str, fn: Callable[[], object], budget: float) -> StepResult:
    outcome: dict[str, BaseException | None] = {}
    started = time.monotonic()

    def target() -> None:
        try:
            fn()
            outcome["error"] = None
        except BaseException as exc:  # reported by the caller, never lost
            outcome["error"] = exc

    # A daemon thread: if the step hangs past its budget it is abandoned, and cannot block interpreter exit.
    worker = threading.Thread(target=target, name=f"cleanup:{name}", daemon=True)
    worker.start()
    worker.join(budget)
    duration = time.monotonic() - started
    if worker.is_alive():
        return StepResult(name, TIMED_OUT, duration, f"still running at its budget of {budget:g}s; abandoned")
    error = outcome.get("error")
    if error is None:
        return StepResult(name, DONE, duration)
    if looks_not_found(error):
        return StepResult(name, NOT_FOUND, duration)
    return StepResult(name, FAILED, duration, _describe(error))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
