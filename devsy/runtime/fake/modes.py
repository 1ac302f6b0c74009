"""The fake runtime's misbehaviour modes and profiles, chosen by --mode/--profile or DEVSY_FAKE_MODE/PROFILE."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from devsy.runtime.wire.constants import API_MINOR


class Mode(str, Enum):
    NORMAL = "normal"
    # Exec argv[0] names a scenario of the Go SDK fake's table (see go_scenarios.py); Logs as the Go fake's.
    CONFORMANCE = "conformance"
    CRASH_BEFORE_HANDSHAKE = "crash-before-handshake"
    CRASH_AFTER_HANDSHAKE = "crash-after-handshake"
    SLOW_HANDSHAKE = "slow-handshake"
    BAD_HANDSHAKE_LINE = "bad-handshake-line"
    INCOMPATIBLE_VERSION = "incompatible-version"
    MALFORMED_INFO = "malformed-info"
    FAILING_PREFLIGHT = "failing-preflight"
    FAILING_RUN = "failing-run"
    EXEC_CRASH = "exec-crash"
    EXEC_SLOW = "exec-slow"
    NONZERO_EXIT = "nonzero-exit"
    SIGNAL_EXIT = "signal-exit"
    # A guest with neither sha256sum nor python3: devsy's agent check exits 12 as the real script would there, so a
    # whole `devsy up` completes (with its "`devsy ssh` will not work" warning) instead of failing agent delivery.
    NO_AGENT_TOOLS = "no-agent-tools"
    # Find reports no labels: the protocol does not require a provider to echo RunImage's labels.
    FIND_WITHOUT_LABELS = "find-without-labels"


    @classmethod
    def _missing_(cls, value: object) -> Mode | None:
        return cls.__members__.get(GO_MODE_NAMES.get(str(value), ""))


# The Go SDK fake's names for the modes that mean the same (`--mode delay-handshake` works on both fakes).
GO_MODE_NAMES = {"delay-handshake": "SLOW_HANDSHAKE", "fail-preflight": "FAILING_PREFLIGHT",
                 "fail-run": "FAILING_RUN", "exec-nonzero": "NONZERO_EXIT"}


class Profile(str, Enum):
    DEFAULT = "default"
    RECREATE = "recreate"  # opt-in recreation: ON_RUN offered to hosts that opt in
    LEGACY = "legacy"  # an API 1.1 provider (as Go providers are): no ReusePreflight, no ON_RUN


@dataclass(frozen=True)
class ProfileSpec:
    """What a profile makes the fake say in Info."""

    recreate_on_run: bool = False
    api_minor: int = API_MINOR


PROFILES: dict[Profile, ProfileSpec] = {
    Profile.DEFAULT: ProfileSpec(),
    Profile.RECREATE: ProfileSpec(recreate_on_run=True),
    Profile.LEGACY: ProfileSpec(api_minor=1),
}


ENV_MODE = "DEVSY_FAKE_MODE"
ENV_PROFILE = "DEVSY_FAKE_PROFILE"
NONZERO_EXIT_CODE = 7
CRASH_EXIT_CODE = 3
