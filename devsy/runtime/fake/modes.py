"""The fake runtime's misbehaviour modes and profiles, chosen by --mode/--profile or DEVSY_FAKE_MODE/PROFILE."""

from __future__ import annotations

from enum import Enum


class Mode(str, Enum):
    NORMAL = "normal"
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


class Profile(str, Enum):
    DEFAULT = "default"
    RECREATE = "recreate"  # opt-in recreation: ON_RUN offered to hosts that opt in


ENV_MODE = "DEVSY_FAKE_MODE"
ENV_PROFILE = "DEVSY_FAKE_PROFILE"
NONZERO_EXIT_CODE = 7
CRASH_EXIT_CODE = 3
