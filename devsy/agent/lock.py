"""The pinned wheels bundled into the agent, and the platforms they are fetched for.

abi3 wheels built for the oldest supported Python load on every newer one, so they are fetched once (for
`BASE_PYTHON`); only cffi has no abi3 wheel and is fetched per interpreter. The text of this lock is part of every
cache key: changing a pin rebuilds the wheel cache and the agent. This is the one list of pins: installing devsy
fetches exactly these into its package data (setup.py), named by the same key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from devsy.agent.errors import AgentBuildError
from devsy.arch import MACHINES, SUPPORTED
from devsy.arch import normalize_arch as canonical_arch

# Requirements pinned exactly. invoke (a paramiko dependency) is left out on purpose: paramiko imports it only for
# `Match exec` in ssh_config files, which the agent never reads.
COMMON = (
    "paramiko==5.1.0",
    "cryptography==50.0.2",
    "bcrypt==5.0.0",
    "pynacl==1.6.2",
    "pycparser==2.23",
)
PER_PYTHON = ("cffi==2.0.0",)
# cryptography excludes 3.9.0 and 3.9.1, so the base is the first 3.9 it accepts.
BASE_PYTHON = "3.9.2"
# Interpreter tag -> the version pip resolves for it.
PYTHONS = (
    ("cp39", "3.9.2"),
    ("cp310", "3.10"),
    ("cp311", "3.11"),
    ("cp312", "3.12"),
    ("cp313", "3.13"),
)
# manylinux2014 == manylinux_2_17 (glibc >= 2.17): the widest set of glibc guests.
PLATFORMS = {arch: (f"manylinux2014_{MACHINES[arch]}", f"manylinux_2_17_{MACHINES[arch]}") for arch in SUPPORTED}


@dataclass(frozen=True)
class WheelLock:
    common: tuple[str, ...] = COMMON
    per_python: tuple[str, ...] = PER_PYTHON
    base_python: str = BASE_PYTHON
    pythons: tuple[tuple[str, str], ...] = PYTHONS

    def text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def key(self) -> str:
        return hashlib.sha256(self.text().encode()).hexdigest()[:16]

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(tag for tag, _ in self.pythons)


DEFAULT_LOCK = WheelLock()


def normalize_arch(arch: str) -> str:
    """devsy's name for `arch` (devsy.arch: `x86_64` -> `amd64`); one no agent can be built for is an AgentBuildError."""
    canonical = canonical_arch(arch)
    if canonical not in SUPPORTED:
        raise AgentBuildError(f"no agent can be built for architecture {arch!r}",
                              hint=f"use one of: {', '.join(SUPPORTED)}")
    return canonical
