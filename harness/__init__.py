"""The devsy parity harness: a pytest plugin (harness.plugin) plus the sweeper and the report validator.

Scenarios mark each case with `@case("suite/case")`; the plugin parametrizes it over the providers the manifest
applies it to and hands it `provider`, `devsy`, `backend`, `case`, `cleanup` and `record_figure` fixtures.
"""

from __future__ import annotations

import pytest

CASE_MARKER = "devsy_case"


def case(case_id: str) -> pytest.MarkDecorator:
    """Mark a scenario function as the catalogue case `suite/case` (must be listed in the manifest)."""
    return getattr(pytest.mark, CASE_MARKER)(case_id)
