"""devcontainer.json's "features" made installable: each Feature's folder, content digest, metadata and options,
in the spec's install order (order.py)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from devsy.devcontainer.features.model import ResolvedFeature, UserFeature, load_metadata, resolve_options
from devsy.devcontainer.features.order import install_order
from devsy.devcontainer.features.source import FeatureSource
from devsy.devcontainer.variables import SubstitutionContext
from devsy.errors import ConfigError


def resolve_features(features: list[UserFeature], override: list[str], config_dir: Path,
                     variables: SubstitutionContext | None = None, *, pins: Mapping[str, str] | None = None,
                     recorded: Mapping[str, str] | None = None) -> list[ResolvedFeature]:
    """The config's Features resolved and ordered; [] when it has none. `variables`: the config's (model.py);
    `pins`: devcontainer-lock.json's digests by Feature id; `recorded`: digests an earlier up resolved them to
    (fetch.py reuses those cached folders without asking the registry)."""
    resolved = []
    for user in features:
        folder, digest = _obtain(user.source, (pins or {}).get(user.source.id), (recorded or {}).get(user.source.id))
        metadata = load_metadata(folder, user.source.id, variables)
        resolved.append(ResolvedFeature(user.source, folder, digest, metadata,
                                        resolve_options(metadata, user.options, user.source.id)))
    seen: dict[str, str] = {}
    for feature in resolved:
        if feature.source.resource in seen:
            raise ConfigError(f'"features" names one Feature twice: "{seen[feature.source.resource]}" and '
                              f'"{feature.source.id}"', hint="keep one of them")
        seen[feature.source.resource] = feature.source.id
    return install_order(resolved, override, config_dir)


def _obtain(source: FeatureSource, pinned: str | None, recorded: str | None) -> tuple[Path, str]:
    if source.kind == "local":
        assert source.local_path is not None  # parse_feature_id sets it for local Features
        return source.local_path, folder_digest(source.local_path)
    from devsy.agent.wheels import cache_root
    from devsy.devcontainer.features.fetch import fetch_feature  # it imports this package's source.py

    fetched = fetch_feature(source, cache_root() / "features", pinned=pinned, recorded=recorded)
    return fetched.folder, fetched.digest


def folder_digest(folder: Path) -> str:
    """A digest of every file's relative path, mode and content (symlinks by their target), in a stable order."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            relative = path.relative_to(folder).as_posix()
            stat = path.lstat()
            digest.update(f"{relative}\0{stat.st_mode & 0o777}\0".encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            else:
                try:
                    digest.update(path.read_bytes())
                except OSError as exc:
                    raise ConfigError(f"cannot read {relative} of the Feature in {folder}: {exc.strerror}",
                                      hint="make the Feature's files readable for devsy") from None
            digest.update(b"\0")
    return "sha256:" + digest.hexdigest()
