"""The one map of machine names to devsy's architecture names (`x86_64` -> `amd64`, `aarch64` -> `arm64`).

Stdlib only and Python 3.9 syntax: devsy.agent.build ships this file in the agent zipapp (as `devsy_agent/arch.py`),
so the guest normalizes with the same table as the host.
"""

SUPPORTED = ("amd64", "arm64")
# What each name is called by `uname -m`, Docker's `Architecture` and the Go/OCI world, lowercased.
_ALIASES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
# The `uname -m` name of each supported architecture (wheel platform tags and the agent's boot check use it).
MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}


def normalize_arch(name: str) -> str:
    """devsy's name for a machine name (`x86_64` -> `amd64`); an unknown name comes back lowercased, unchanged."""
    lowered = name.strip().lower()
    return _ALIASES.get(lowered, lowered)


def is_supported(name: str) -> bool:
    return normalize_arch(name) in SUPPORTED
