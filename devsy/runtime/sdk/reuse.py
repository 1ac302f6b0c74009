"""ReusePreflight on the provider side: the request names only the developer identity, not a mount policy.

The policy the provider enforces is its own: the recorded policy's version must be the current one, and its owner
must be the requested identity. So the expected policy is the recorded one with the current version and the new
owner; any difference is FAILED_PRECONDITION (RecreateRequired). The host compares the full policy itself.
"""

from __future__ import annotations

from dataclasses import replace

from devsy.driver.reuse import MOUNT_POLICY_VERSION, MountPolicy


def expected_policy(recorded_label: str, remote_user: str) -> MountPolicy | None:
    """None when nothing (or nothing readable) is recorded: the driver's check then refuses an unreadable label."""
    recorded = MountPolicy.from_label(recorded_label)
    return replace(recorded, version=MOUNT_POLICY_VERSION, owner=remote_user) if recorded is not None else None
