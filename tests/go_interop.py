"""Where the Go peers built from the Go devsy-runtime-sdk live (../shared/interop/bin, README there), for tests.

DEVSY_GO_INTEROP_BIN overrides the directory. Where a binary is absent the test is skipped with the path it looked
at, so a missing peer is reported as not runnable, never as a pass.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENV = "DEVSY_GO_INTEROP_BIN"
DEFAULT_BIN = Path(__file__).resolve().parents[1].parent / "shared" / "interop" / "bin"


def interop_dir() -> Path:
    """The directory looked at: $DEVSY_GO_INTEROP_BIN, else ../shared/interop/bin relative to the repository."""
    return Path(os.environ.get(ENV) or DEFAULT_BIN)


def go_interop_bin() -> Path | None:
    """The directory of the Go peers, or None when it does not exist."""
    directory = interop_dir()
    return directory if directory.is_dir() else None


def require_go_binary(name: str) -> Path:
    """The executable `name` among the Go peers; skips the test (naming the path looked at) when it is absent."""
    path = interop_dir() / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.skip(f"Go interop peer {name} not runnable here: no executable at {path} (set {ENV} to the "
                    "directory of the binaries built from the Go devsy-runtime-sdk)")
    return path
