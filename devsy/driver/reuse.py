"""The ownership contract checked before an existing instance is reused (shared by every driver).

An instance records, as labels, the developer identity that owns the workspace mount and a versioned mount policy.
Reusing it for a different identity or policy would silently mix owners, so it is refused before anything is
touched, with guidance to recreate. The label format is fixed: instances made by earlier devsy versions carry it,
and they stay reusable only while `MountPolicy.to_label()` writes exactly those bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from devsy.driver.base import LABEL_MOUNT_POLICY, LABEL_REMOTE_USER
from devsy.errors import RecreateRequired

MOUNT_POLICY_VERSION = "v1"
_MODES = {"rw": False, "ro": True}
# The target is the one free-form path before `mode`: it may contain ';' (a bind target can), the version cannot.
_LABEL = re.compile(r"(?P<version>[^;=]+);target=(?P<target>.*?);mode=(?P<mode>rw|ro);(?P<rest>owner=.*)", re.DOTALL)

PolicyItems = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class MountPolicy:
    """How the workspace mount was made: target, mode and owning identity, plus what a backend adds (msb's folder
    presentation) as ordered key=value extras. It never contains the mount's source (a secret)."""

    target: str
    read_only: bool
    owner: str
    extras: PolicyItems = ()
    version: str = MOUNT_POLICY_VERSION

    def to_label(self) -> str:
        """The label value: `v1;target=T;mode=rw|ro;owner=U[;key=value...]`."""
        items = [("target", self.target), ("mode", "ro" if self.read_only else "rw"), ("owner", self.owner),
                 *self.extras]
        return ";".join([self.version, join_items(items)])

    @classmethod
    def from_label(cls, value: str) -> MountPolicy | None:
        """The policy a label records; None when there is none or it cannot be read (see `check_reuse`)."""
        match = _LABEL.fullmatch(value)
        if match is None:
            return None
        items = _parse_items(match["rest"])
        keys = [key for key, _ in items]  # the first is `owner`
        if len(set(keys)) != len(keys):
            return None
        return cls(target=match["target"], read_only=_MODES[match["mode"]], owner=items[0][1],
                   extras=tuple(items[1:]), version=match["version"])

    def with_extras(self, extras: Iterable[tuple[str, str]]) -> MountPolicy:
        return replace(self, extras=(*self.extras, *extras))

    def split_extras(self, keys: Iterable[str]) -> tuple[MountPolicy, PolicyItems]:
        """(this policy without the extras named by `keys`, those extras)."""
        wanted = set(keys)
        taken = tuple(item for item in self.extras if item[0] in wanted)
        return replace(self, extras=tuple(item for item in self.extras if item[0] not in wanted)), taken


def join_items(items: Iterable[tuple[str, str]]) -> str:
    return ";".join(f"{key}={value}" for key, value in items)


def _parse_items(text: str) -> list[tuple[str, str]]:
    """`key=value;...` (text starts with a key): a part without '=' continues the previous value, as written."""
    items: list[tuple[str, str]] = []
    for part in text.split(";"):
        key, eq, value = part.partition("=")
        if (eq and key) or not items:
            items.append((key, value))
        else:
            items[-1] = (items[-1][0], f"{items[-1][1]};{part}")
    return items


@dataclass(frozen=True)
class Ownership:
    """Who an instance was made for and how its workspace is mounted: what reuse compares, kept as two labels."""

    remote_user: str
    policy: MountPolicy | None

    def to_labels(self) -> dict[str, str]:
        labels = {LABEL_REMOTE_USER: self.remote_user}
        if self.policy is not None:
            labels[LABEL_MOUNT_POLICY] = self.policy.to_label()
        return labels


def check_reuse(workspace_id: str, recorded_labels: Mapping[str, str], requested: Ownership) -> None:
    """Raise RecreateRequired when the instance's labels record another identity or mount policy than requested.
    A policy label that cannot be read never matches: what it promised is unknown."""
    recorded_user = recorded_labels.get(LABEL_REMOTE_USER, "")
    recorded_label = recorded_labels.get(LABEL_MOUNT_POLICY, "")
    wanted = requested.policy.to_label() if requested.policy is not None else ""
    changes = []
    if recorded_user != requested.remote_user:
        changes.append(f"remote user {recorded_user or '(none)'!r} -> {requested.remote_user!r}")
    # Compared as labels, byte for byte, as every devsy before this one did; an unreadable label never matches.
    if recorded_label != wanted or (recorded_label and MountPolicy.from_label(recorded_label) is None):
        changes.append(f"workspace mount policy {recorded_label or '(none)'!r} -> {wanted or '(none)'!r}")
    if changes:
        raise RecreateRequired(
            f"workspace {workspace_id} was created with a different owner or mount policy ({'; '.join(changes)}); "
            "nothing was changed",
            hint="rerun `devsy up` with --recreate to replace the instance (data outside the workspace folder "
            "is lost), or restore the previous configuration",
        )
