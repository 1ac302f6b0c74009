"""Project folders for `devsy up`: a .devcontainer/devcontainer.json written from a dict or verbatim."""

from __future__ import annotations

import json
from pathlib import Path


def make_project(root: Path, config: dict | str) -> Path:
    """A folder with .devcontainer/devcontainer.json (a dict is dumped as JSON, a str written verbatim)."""
    (root / ".devcontainer").mkdir(parents=True, exist_ok=True)
    text = config if isinstance(config, str) else json.dumps(config)
    (root / ".devcontainer" / "devcontainer.json").write_text(text)
    return root
