"""The ownership contract checked before an existing instance is reused (shared by every driver).

An instance records, as labels, the developer identity that owns the workspace mount and a versioned mount-policy
string. Reusing it for a different identity or policy would silently mix owners, so it is refused before anything is
touched, with guidance to recreate.
"""

from __future__ import annotations

from devsy.errors import RecreateRequired

MOUNT_POLICY_VERSION = "v1"


def mount_policy(*, target: str, read_only: bool, owner: str, extra: str = "") -> str:
    """The versioned policy string of the workspace mount. It never contains the mount's source (a secret)."""
    parts = [MOUNT_POLICY_VERSION, f"target={target}", f"mode={'ro' if read_only else 'rw'}", f"owner={owner}"]
    if extra:
        parts.append(extra)
    return ";".join(parts)


def check_reuse(workspace_id: str, recorded_user: str, recorded_policy: str, user: str, policy: str) -> None:
    """Raise RecreateRequired when the recorded identity or mount policy differs from the requested one."""
    changes = []
    if recorded_user != user:
        changes.append(f"remote user {recorded_user or '(none)'!r} -> {user!r}")
    if recorded_policy != policy:
        changes.append(f"workspace mount policy {recorded_policy or '(none)'!r} -> {policy!r}")
    if changes:
        raise RecreateRequired(
            f"workspace {workspace_id} was created with a different owner or mount policy ({'; '.join(changes)}); "
            "nothing was changed",
            hint=f"rerun `devsy up` with --recreate to replace the instance (data outside the workspace folder "
            f"is lost), or restore the previous configuration",
        )
