"""The spec's Feature install order (containers.dev "Features", "Installation order"; the reference CLI's
containerFeaturesOrder.ts): rounds over a graph of hard (dependsOn) and soft (installsAfter) dependencies.

Each round takes every Feature whose dependencies are installed (installsAfter counts only Features present), keeps
those of the highest overrideFeatureInstallOrder priority (the first listed is highest; unlisted: 0) and commits
them sorted by their id, so the order never depends on the order of devcontainer.json's keys. A round with nothing
to take is a cycle: a ConfigError listing it.
"""

from __future__ import annotations

from pathlib import Path

from devsy.devcontainer.features.model import ResolvedFeature
from devsy.devcontainer.features.source import parse_feature_id
from devsy.errors import ConfigError


def install_order(features: list[ResolvedFeature], override: list[str], config_dir: Path) -> list[ResolvedFeature]:
    """`features` in the order they are installed."""
    by_resource = {feature.source.resource: feature for feature in features}
    hard = {key: _hard_dependencies(feature, by_resource) for key, feature in by_resource.items()}
    soft = {key: {dep for ref in feature.metadata.installs_after
                  for dep in matching_features(ref, feature, by_resource) if dep != key}
            for key, feature in by_resource.items()}
    priority = _priorities(override, by_resource, config_dir)
    installed: list[str] = []
    remaining = set(by_resource)
    while remaining:
        ready = [key for key in remaining if hard[key] <= set(installed) and (soft[key] & remaining) == set()]
        if not ready:
            cycle = [by_resource[key].source.id for key in _cycle(remaining, hard, soft)]
            raise ConfigError(f"the Features' dependencies form a cycle: {' -> '.join(cycle)}",
                              hint="remove one of the installsAfter/dependsOn entries that close the cycle")
        top = max(priority.get(key, 0) for key in ready)
        for key in sorted((k for k in ready if priority.get(k, 0) == top), key=lambda k: by_resource[k].source.id):
            installed.append(key)
            remaining.discard(key)
    return [by_resource[key] for key in installed]


def _hard_dependencies(feature: ResolvedFeature, by_resource: dict[str, ResolvedFeature]) -> set[str]:
    deps: set[str] = set()
    for ref in feature.metadata.depends_on:
        found = matching_features(ref, feature, by_resource)
        if not found:
            raise ConfigError(
                f'Feature "{feature.source.id}" depends on "{ref}", which is not in devcontainer.json\'s "features"',
                hint=f'add "{ref}" to "features"')
        deps |= found
    return deps


def matching_features(ref: str, feature: ResolvedFeature, by_resource: dict[str, ResolvedFeature]) -> set[str]:
    """The Features present that `ref` (an installsAfter/dependsOn entry of `feature`) names: by its source without
    version, a relative path resolved against the naming Feature's folder, or (a bare name) by the declared id."""
    if "/" not in ref:
        return {key for key, other in by_resource.items() if other.metadata.id == ref}
    try:
        wanted = parse_feature_id(ref, feature.folder if ref.startswith(".") else Path("/")).resource
    except ConfigError:
        return set()  # an id of a form devsy cannot install names no Feature present
    return {wanted} & set(by_resource)


def _priorities(override: list[str], by_resource: dict[str, ResolvedFeature], config_dir: Path) -> dict[str, int]:
    priority: dict[str, int] = {}
    for index, ref in enumerate(override):
        named = [key for key, feature in by_resource.items()
                 if feature.source.id == ref or _resource_of(ref, config_dir) == key]
        if not named:
            raise ConfigError(f'"overrideFeatureInstallOrder" names "{ref}", which is not in "features"',
                              hint='list only Features of "features" (as written there, a version may be left out)')
        for key in named:
            priority[key] = len(override) - index
    return priority


def _resource_of(ref: str, config_dir: Path) -> str | None:
    try:
        return parse_feature_id(ref, config_dir).resource
    except ConfigError:
        return None


def _cycle(remaining: set[str], hard: dict[str, set[str]], soft: dict[str, set[str]]) -> list[str]:
    """One cycle among `remaining` (every one of them waits on another), closed (its first key again at the end)."""
    edges = {key: sorted((hard[key] | soft[key]) & remaining) for key in remaining}
    path: list[str] = []
    key = min(remaining)
    while key not in path:
        path.append(key)
        key = edges[key][0]
    return path[path.index(key):] + [key]
