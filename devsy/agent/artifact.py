"""Which agent file to deliver: `DEVSY_AGENT_BINARY` when set (nothing is built), else the cached build for the
workspace's architecture, built from the wheels installed with devsy (offline too: see devsy/agent/wheels.py)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from devsy.agent.errors import AgentError

BINARY_ENV = "DEVSY_AGENT_BINARY"


@dataclass(frozen=True)
class AgentArtifact:
    path: Path
    sha256: str
    size: int
    origin: str  # "built" or BINARY_ENV

    def open(self) -> BinaryIO:
        """A fresh read stream over the whole file (delivery opens one per attempt)."""
        return open(self.path, "rb")


def resolve_artifact(arch: str) -> AgentArtifact:
    override = os.environ.get(BINARY_ENV, "")
    if override:
        return _from_file(Path(override).expanduser())
    from devsy.agent.build import build_agent  # only here: the builder pulls in zipfile, hashing and file locks

    built = build_agent(arch)
    return AgentArtifact(built.path, built.sha256, built.path.stat().st_size, "built")


def _from_file(path: Path) -> AgentArtifact:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise AgentError(f"{BINARY_ENV}={path} cannot be read: {exc.strerror or exc}",
                         hint=f"point {BINARY_ENV} at an agent built with `python -m devsy.agent.build --out PATH`, "
                              "or unset it to build one") from exc
    return AgentArtifact(path, digest.hexdigest(), path.stat().st_size, BINARY_ENV)
