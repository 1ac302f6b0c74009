"""Per-case records: what one result id did (outcome, duration, reason with evidence, cleanup, figures)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

PASS, FAIL, SKIP, ERROR = "pass", "fail", "skip", "error"
OUTCOMES = (PASS, FAIL, SKIP, ERROR)
# The user property that carries a record from an xdist worker to the controller.
RECORD_PROPERTY = "devsy_record"
RESULT_ID_PROPERTY = "devsy_result_id"

Figure = int | float | str


@dataclass
class CaseRecord:
    result_id: str
    case_id: str
    provider: str
    nodeid: str
    outcome: str
    duration: float
    reason: str = ""
    evidence: list[str] = field(default_factory=list)
    cleanup: list[dict[str, Any]] = field(default_factory=list)
    cleanup_errors: list[str] = field(default_factory=list)
    figures: dict[str, Figure] = field(default_factory=dict)
    diagnostics: str | None = None
    kept: list[str] = field(default_factory=list)
    workspaces: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r} is not one of {OUTCOMES}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CaseRecord":
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{key: value for key, value in data.items() if key in known})

    @classmethod
    def from_json(cls, text: str) -> "CaseRecord":
        return cls.from_dict(json.loads(text))
