"""The cooperative body deadline of a case: every wait in a case takes its timeout from here."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


class DeadlineExceeded(TimeoutError):
    """The case body ran out of time; the message names what was about to run."""


@dataclass
class Deadline:
    seconds: float
    started: float = field(default_factory=time.monotonic)

    @property
    def expires_at(self) -> float:
        return self.started + self.seconds

    def remaining(self) -> float:
        return max(0.0, self.expires_at - time.monotonic())

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def timeout(self, what: str, cap: float | None = None) -> float:
        """Seconds `what` may take: the remaining time, at most `cap`; raises DeadlineExceeded when none is left."""
        left = self.remaining()
        if left <= 0.0:
            raise DeadlineExceeded(
                f"case deadline of {self.seconds:.0f}s expired before {what}; raise --devsy-case-timeout if the "
                f"backend is slow here"
            )
        return left if cap is None else min(left, cap)
