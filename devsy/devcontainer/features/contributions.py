"""What installed Features add to the instance's run options, merged as the spec's "Merge logic" says.

mounts: the Features' (install order), then devcontainer.json's; one target mounted once, the last one wins.
capAdd / securityOpt: the union. privileged / init: true when any Feature or the config asks for it.
entrypoint: each Feature's runs in turn before the instance's own command, as the reference CLI chains them.
containerEnv is not merged here: it is ENV in the Feature layers (layer.py), where a value such as
"/opt/x/bin:${PATH}" is expanded against the image's own; a run-time copy would override it unexpanded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from devsy.devcontainer.config import DevContainerConfig
from devsy.devcontainer.features.model import FEATURE_LIFECYCLE, ResolvedFeature
from devsy.devcontainer.lifecycle_commands import LifecycleCommand
from devsy.driver.base import RunOptions
from devsy.progress import Progress
from devsy.driver.docker.engine import connect, engine_errors


def apply_feature_contributions(options: RunOptions, features: Sequence[ResolvedFeature]) -> None:
    """Merge `features`' contributions into `options` (already holding the config's own and its command)."""
    if not features:
        return
    by_target = {m.target: m for feature in features for m in feature.metadata.mounts}
    by_target.update({m.target: m for m in options.mounts})
    options.mounts = list(by_target.values())
    options.cap_add = _union([*(c for f in features for c in f.metadata.cap_add), *options.cap_add])
    options.security_opt = _union([*(s for f in features for s in f.metadata.security_opt), *options.security_opt])
    if any(f.metadata.privileged for f in features):
        options.privileged = True
    if any(f.metadata.init for f in features):
        options.init = True
    entrypoints = [f.metadata.entrypoint for f in features if f.metadata.entrypoint]
    if entrypoints:
        command = [*(options.entrypoint or []), *(options.cmd or [])] if options.entrypoint is not None \
            else _image_command(options.image)
        options.entrypoint = ["/bin/sh", "-c", "\n".join([*entrypoints, 'exec "$@"']), "-"]
        options.cmd = command


def feature_lifecycle_commands(features: Sequence[ResolvedFeature], hook: str) -> list[LifecycleCommand]:
    """The `hook` (a FEATURE_LIFECYCLE field, e.g. "post_create_command") each Feature declares, in install order:
    the spec runs them before the config's own. Each entry's label names its Feature, so output and a failure are
    attributable."""
    if hook not in FEATURE_LIFECYCLE:
        raise ValueError(f"{hook} is not a Feature lifecycle hook ({', '.join(FEATURE_LIFECYCLE)})")
    found = []
    for feature in features:
        command: LifecycleCommand | None = getattr(feature.metadata, hook)
        if command is not None:
            labelled = tuple((f"{label} (Feature {feature.source.shown})", argv) for label, argv in command.commands)
            found.append(dataclasses.replace(command, commands=labelled))
    return found


def _union(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _image_command(ref: str) -> list[str]:
    """The image's own ENTRYPOINT + CMD (what runs when devsy does not override the command)."""
    import docker.errors  # noqa: PLC0415 - the SDK is not imported with this module: a reused `up` needs none

    client = connect()
    try:
        with engine_errors(f"looking up image {ref}"):
            try:
                config = client.images.get(ref).attrs.get("Config") or {}
            except docker.errors.ImageNotFound:
                config = {}
    finally:
        client.close()
    return [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]


def with_recorded_features(config: DevContainerConfig, recorded: Mapping[str, str],
                           progress: Progress | None = None) -> DevContainerConfig:
    """`config` with the lifecycle commands of the Features its instance was built with (`recorded`: FeatureSource.key
    -> digest, kept by the up that built it; no build, and fetched Features come from the cache without a registry
    request).
    A Feature added to devcontainer.json since then is not installed in the instance, so its hooks do not run: said once."""
    built = [feature for feature in config.features if feature.source.key in recorded]
    added = sorted(feature.source.shown for feature in config.features if feature.source.key not in recorded)
    if progress is not None and added:
        progress.warn(f"Features added to devcontainer.json since the instance was built are not installed in it "
                      f"({', '.join(added)}): run `devsy up --recreate` to install them")
    if not built:
        return config
    from devsy.devcontainer.image_prepare import config_features  # noqa: PLC0415 - it builds images (and the SDK)

    return with_feature_hooks(config, config_features(dataclasses.replace(config, features=built), recorded=recorded))


def with_feature_hooks(config: DevContainerConfig, features: Sequence[ResolvedFeature]) -> DevContainerConfig:
    """`config` with its Features' lifecycle commands (feature_hooks), which run before the config's own."""
    hooks = {name: tuple(feature_lifecycle_commands(features, attr)) for attr, name in FEATURE_LIFECYCLE.items()}
    return dataclasses.replace(config, feature_hooks={name: found for name, found in hooks.items() if found})
