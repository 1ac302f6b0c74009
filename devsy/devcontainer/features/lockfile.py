"""devcontainer-lock.json: the digests the config's OCI and tarball Features are pinned to, as the reference CLI
reads and writes it (devcontainers/cli src/spec-configuration/lockfile.ts).

Its place is beside the config: `devcontainer-lock.json`, or `.devcontainer-lock.json` for a config whose name starts
with a dot (`.devcontainer.json`). Its shape:

    {
      "features": {
        "ghcr.io/devcontainers/features/node:1": {
          "version": "1.6.1",
          "resolved": "ghcr.io/devcontainers/features/node@sha256:...",
          "integrity": "sha256:..."
        }
      }
    }

keyed by the Feature id as written in devcontainer.json; `integrity` is what pins (the manifest digest of an OCI
Feature, the file's sha256 of a tarball), `resolved` names it by that digest (a tarball: its URL), `dependsOn`
lists a Feature's dependencies when it has any. Written as the reference writes it: entries sorted by id,
`JSON.stringify(lockfile, null, 2)` plus a newline, and only when the content changes. Like the reference without
`--experimental-lockfile`, devsy updates a lockfile that exists and creates one only when asked (`create=True`):
a lockfile is the project's decision, checked in with it, and devsy should not add files to a project unasked.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devsy.errors import ConfigError

if TYPE_CHECKING:
    from devsy.devcontainer.features.model import ResolvedFeature
    from devsy.devcontainer.features.source import FeatureSource

LOCKFILE = "devcontainer-lock.json"


@dataclass(frozen=True)
class LockEntry:
    """One Feature's pin, in the reference's field order."""

    id: str  # the Feature id as written in devcontainer.json
    version: str  # its devcontainer-feature.json "version"
    resolved: str  # OCI: registry/repository@digest; tarball: the URL
    integrity: str  # "sha256:..."
    depends_on: tuple[str, ...] = field(default=())

    def as_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"version": self.version, "resolved": self.resolved, "integrity": self.integrity}
        if self.depends_on:
            entry["dependsOn"] = list(self.depends_on)
        return entry


def lock_entry(source: FeatureSource, digest: str, version: str, depends_on: Iterable[str] = ()) -> LockEntry:
    """The entry the reference writes for a fetched Feature: `digest` what fetch_feature returned, `version` from
    its devcontainer-feature.json, `depends_on` its "dependsOn" keys."""
    resolved = f"{source.registry}/{source.repository}@{digest}" if source.kind == "oci" \
        else str(source.url or source.id)
    return LockEntry(source.id, version, resolved, digest, tuple(depends_on))


def update_lockfile(config_path: Path, features: Iterable[ResolvedFeature], *, create: bool = False) -> bool:
    """write_lockfile for a config's resolved Features (local ones have no entry, as in the reference)."""
    return write_lockfile(config_path, [
        lock_entry(feature.source, feature.digest, feature.metadata.version, feature.metadata.depends_on)
        for feature in features if feature.source.kind != "local"], create=create)


def lockfile_path(config_path: Path) -> Path:
    """Where the lockfile of the config at `config_path` lives (the reference's rule)."""
    name = "." + LOCKFILE if config_path.name.startswith(".") else LOCKFILE
    return config_path.parent / name


def read_lockfile(config_path: Path) -> dict[str, str]:
    """Feature id -> pinned digest ({} without a lockfile). ConfigError naming the file when it is malformed."""
    path = lockfile_path(config_path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
                          hint="make it readable, or delete it to pin the Features anew") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}", hint="fix it, or delete it to pin the Features anew") \
            from None
    features = data.get("features") if isinstance(data, dict) else None
    if not isinstance(features, dict):
        raise ConfigError(f'{path} has no "features" object', hint="fix it, or delete it to pin the Features anew")
    pins = {}
    for feature_id, entry in features.items():
        integrity = entry.get("integrity") if isinstance(entry, dict) else None
        if not isinstance(integrity, str) or not integrity.startswith("sha256:") or len(integrity) != 71:
            raise ConfigError(f'{path}: the entry of Feature "{feature_id}" has no sha256 "integrity"',
                              hint="fix the entry, or delete it to pin that Feature anew")
        pins[feature_id] = integrity
    return pins


def render_lockfile(entries: Iterable[LockEntry]) -> str:
    """The lockfile's text as the reference writes it."""
    ordered = sorted(entries, key=lambda entry: (entry.id.lower(), entry.id))  # ~ JavaScript's localeCompare
    lockfile = {"features": {entry.id: entry.as_json() for entry in ordered}}
    return json.dumps(lockfile, indent=2, ensure_ascii=False) + "\n"


def write_lockfile(config_path: Path, entries: Iterable[LockEntry], *, create: bool = False) -> bool:
    """Write the lockfile of `entries` (the config's fetched Features) if one exists or `create`, and only when
    its content changes; True when written. Atomic: a reader never sees half a file."""
    path = lockfile_path(config_path)
    text = render_lockfile(entries)
    try:
        old: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
                          hint="make it readable, or delete it") from None
    if old == text or (old is None and not create):
        return False
    temporary = None
    try:
        fd, temporary = tempfile.mkstemp(prefix=".devcontainer-lock-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, 0o644)  # a project file like the config beside it (mkstemp makes it private)
        os.replace(temporary, path)
    except OSError as exc:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        raise ConfigError(f"cannot write {path}: {exc.strerror}", hint="make the config's folder writable") from None
    return True
