"""devcontainer.json's "features" made installable: each Feature's folder, content digest, metadata and options,
in the spec's install order (order.py)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from devsy.devcontainer.features.model import ResolvedFeature, UserFeature, load_metadata, resolve_options
from devsy.devcontainer.features.order import install_order
from devsy.devcontainer.features.source import FeatureSource
from devsy.devcontainer.variables import SubstitutionContext
from devsy.errors import ConfigError


def resolve_features(features: list[UserFeature], override: list[str], config_dir: Path,
                     variables: SubstitutionContext | None = None) -> list[ResolvedFeature]:
    """The config's Features resolved and ordered; [] when it has none. `variables`: the config's (model.py)."""
    resolved = []
    for user in features:
        folder, digest = _obtain(user.source)
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


def _obtain(source: FeatureSource) -> tuple[Path, str]:
    if source.kind == "local":
        assert source.local_path is not None  # parse_feature_id sets it for local Features
        return source.local_path, folder_digest(source.local_path)
    try:
        from devsy.devcontainer.features.fetch import fetch_feature  # features-oci's; absent until it lands
    except ImportError:
        raise ConfigError(f'Feature "{source.id}": {source.kind} Features are not available yet',
                          hint='use a local Feature ("./folder" next to devcontainer.json) for now') from None
    from devsy.agent.wheels import cache_root

    fetched = fetch_feature(source, cache_root() / "features")
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
