"""ReusePreflight on the provider side: the request names only the developer identity, not a mount policy.

The policy the provider enforces is its own: the recorded policy's version must be the current one, and its owner
must be the requested identity. So the expected policy is the recorded one with the current version and the new
owner; any difference is FAILED_PRECONDITION (RecreateRequired). The host compares the full policy itself.
"""

from __future__ import annotations

from devsy.driver.reuse import MOUNT_POLICY_VERSION


def expected_policy(recorded: str, remote_user: str) -> str:
    if not recorded:
        return ""
    parts = recorded.split(";")
    parts[0] = MOUNT_POLICY_VERSION
    return ";".join(f"owner={remote_user}" if p.startswith("owner=") else p for p in parts)
