"""devcontainer.json's "features" made installable: each Feature's folder, content digest, metadata and options,
with the Features their dependsOn names, in the spec's install order (order.py).

dependsOn (containers.dev "Features", the reference CLI's containerFeaturesOrder.ts): a Feature the config does not
list is fetched (OCI or tarball) and installed with the options the dependsOn entry gives, recursively; its
devcontainer-lock.json pin applies by the id as the dependsOn entry writes it, which is also the id of its lockfile
entry (the reference keys it so). One Feature is the same resource at the same digest with the same options (the
reference's identity); devsy installs a resource once, so a dependsOn that asks for a listed Feature with other
options or at another version is refused (the reference would install that Feature twice). A local dependency is
installed only when "features" lists it, and a bare name ("node") only names a Feature present: neither can be
fetched. Cycles are found by install_order, which names them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from devsy.devcontainer.features.model import (OptionValue, ResolvedFeature, UserFeature, feature_files,
                                               load_metadata, resolve_options)
from devsy.devcontainer.features.order import install_order, matching_features
from devsy.devcontainer.features.source import FeatureSource, parse_feature_id, shown_id
from devsy.devcontainer.variables import SubstitutionContext
from devsy.errors import ConfigError

MAX_DEPENDENCY_DEPTH = 8  # dependsOn chains of published Features are short; a longer one is a publishing mistake
MAX_FEATURES = 64  # every Feature is an image layer: more is no dev container anyone meant


def resolve_features(features: list[UserFeature], override: list[str], config_dir: Path,
                     variables: SubstitutionContext | None = None, *, pins: Mapping[str, str] | None = None,
                     recorded: Mapping[str, str] | None = None) -> list[ResolvedFeature]:
    """The config's Features and their dependencies resolved and ordered; [] when it has none. `variables`: the
    config's (model.py); `pins`: devcontainer-lock.json's digests by Feature id; `recorded`: digests an earlier up
    resolved them to, by FeatureSource.key (fetch.py reuses those cached folders without asking the registry)."""
    resolver = _Resolver(variables, pins or {}, recorded or {})
    resolved = [resolver.resolve(user.source, user.options, user.source.shown, version=user.version)
                for user in features]
    seen: dict[str, str] = {}
    for feature in resolved:
        if feature.source.resource in seen:
            raise ConfigError(f'"features" names one Feature twice: "{seen[feature.source.resource]}" and '
                              f'"{feature.source.shown}"', hint="keep one of them")
        seen[feature.source.resource] = feature.source.shown
    return install_order(resolver.with_dependencies(resolved), override, config_dir)


class _Resolver:
    def __init__(self, variables: SubstitutionContext | None, pins: Mapping[str, str],
                 recorded: Mapping[str, str]) -> None:
        self.variables, self.pins, self.recorded = variables, pins, recorded

    def resolve(self, source: FeatureSource, options: dict[str, OptionValue], label: str, *,
                version: str | None = None) -> ResolvedFeature:
        folder, digest = _obtain(source, self.pins.get(source.id), self.recorded.get(source.key))
        metadata = load_metadata(folder, label, self.variables, root=source.local_root)
        return ResolvedFeature(source, folder, digest, metadata, resolve_options(metadata, options, label,
                                                                                 version=version))

    def with_dependencies(self, listed: list[ResolvedFeature]) -> list[ResolvedFeature]:
        """`listed` and every Feature their dependsOn reaches that is not among them, breadth first."""
        present = list(listed)
        # Each Feature to look at with the chain of dependsOn that led to it (the listed ones: just themselves).
        worklist: list[tuple[ResolvedFeature, tuple[str, ...]]] = [(f, (f.source.shown,)) for f in listed]
        while worklist:
            feature, chain = worklist.pop(0)
            for ref, options in feature.metadata.depends_on.items():
                found = self._present(ref, options, feature, present)
                if found is not None:
                    continue
                if len(chain) > MAX_DEPENDENCY_DEPTH:
                    raise ConfigError(f"the Features' dependsOn chain is longer than {MAX_DEPENDENCY_DEPTH}: "
                                      f"{' -> '.join((*chain, shown_id(ref)))}",
                                      hint="check the Features' dependsOn: a chain this long is a mistake")
                if len(present) >= MAX_FEATURES:
                    raise ConfigError(f"the Features and their dependencies are more than {MAX_FEATURES}",
                                      hint="check the Features' dependsOn entries")
                dependency = self.resolve(_dependency_source(ref, feature), options,
                                          f"{shown_id(ref)} (a dependency of {feature.source.shown})")
                present.append(dependency)
                worklist.append((dependency, (*chain, shown_id(ref))))
        return present

    def _present(self, ref: str, options: dict[str, OptionValue], feature: ResolvedFeature,
                 present: list[ResolvedFeature]) -> ResolvedFeature | None:
        """The Feature present that the dependsOn entry (`ref`, `options`) of `feature` is, None when no Feature
        present is that resource; ConfigError when one is, but with other options or at another version."""
        by_resource = {other.source.resource: other for other in present}
        keys = matching_features(ref, feature, by_resource)
        if not keys:
            return None
        other = by_resource[next(iter(keys))]
        asked = resolve_options(other.metadata, options, f"{shown_id(ref)} (a dependency of {feature.source.shown})")
        if asked != other.options:
            raise _conflict(feature, ref, other, f"with the options {_shown(asked)}, but it is installed with "
                                                 f"{_shown(other.options)}")
        if other.source.kind != "local" and ref != other.source.id:
            # Another way to write the same resource (another tag): the same Feature only at the same digest.
            asked = _dependency_source(ref, feature)
            asked_digest = _obtain(asked, self.pins.get(ref), self.recorded.get(asked.key))[1]
            if asked_digest != other.digest:
                raise _conflict(feature, ref, other, f"at {asked_digest}, but it is installed at {other.digest}")
        return other


def _dependency_source(ref: str, feature: ResolvedFeature) -> FeatureSource:
    """The FeatureSource of a dependsOn entry naming no Feature present: OCI or tarball, which devsy fetches."""
    if "/" not in ref or ref.startswith((".", "/")):
        what = "a bare name" if "/" not in ref else "a local Feature"
        raise ConfigError(
            f'Feature "{feature.source.shown}" depends on "{ref}", which is not in devcontainer.json\'s "features": '
            f"{what} cannot be fetched", hint=f'add "{ref}" to "features" (a local Feature as a path relative to '
            "devcontainer.json), or depend on it by its OCI reference")
    try:
        return parse_feature_id(ref, Path("/"))  # not local: the folder is not used
    except ConfigError as exc:
        raise ConfigError(f'Feature "{feature.source.shown}" depends on a Feature devsy cannot fetch: {exc.message}',
                          hint=exc.hint) from None


def _conflict(feature: ResolvedFeature, ref: str, other: ResolvedFeature, how: str) -> ConfigError:
    return ConfigError(f'Feature "{feature.source.shown}" depends on "{shown_id(ref)}" {how} (as '
                       f'"{other.source.shown}")', hint=f'give "{other.source.shown}" what "{feature.source.shown}" '
                       'asks for in "features" (or remove '
                       "it there, so devsy installs it as the dependsOn asks): devsy installs each Feature once")


def _shown(options: Mapping[str, OptionValue]) -> str:
    return "{" + ", ".join(f"{name}: {value!r}" for name, value in sorted(options.items())) + "}"


def _obtain(source: FeatureSource, pinned: str | None, recorded: str | None) -> tuple[Path, str]:
    if source.kind == "local":
        assert source.local_path is not None  # parse_feature_id sets it for local Features
        return source.local_path, folder_digest(source.local_path, source.local_root or source.local_path,
                                                source.shown)
    from devsy.agent.wheels import cache_root
    from devsy.devcontainer.features.fetch import fetch_feature  # it imports this package's source.py

    fetched = fetch_feature(source, cache_root() / "features", pinned=pinned, recorded=recorded)
    return fetched.folder, fetched.digest


def folder_digest(folder: Path, root: Path, feature_id: str) -> str:
    """A digest of every file's relative path, mode and content as installed (feature_files: a symlink by its
    target's), in a stable order."""
    digest = hashlib.sha256()
    for relative, path in sorted(feature_files(folder, root, feature_id).items()):
        try:
            digest.update(f"{relative}\0{path.stat().st_mode & 0o777}\0".encode())
            digest.update(path.read_bytes())
        except OSError as exc:
            raise ConfigError(f"cannot read {relative} of the Feature in {folder}: {exc.strerror}",
                              hint="make the Feature's files readable for devsy") from None
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()
