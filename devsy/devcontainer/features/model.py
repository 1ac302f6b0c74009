"""A Feature's devcontainer-feature.json, and the options devcontainer.json gives it, parsed and checked.

Options reach install.sh as environment variables named as the spec says (the option id with every character
outside [A-Za-z0-9_] made "_", leading digits/underscores made one "_", upper-cased); a boolean is "true"/"false".
A bare string in devcontainer.json ("features": {"id": "1.2"}) is the spec's shorthand for the "version" option; as
in the reference CLI (getFeatureValueObject), it sets that option only when the Feature declares one, else the
defaults apply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devsy.devcontainer.features.source import FEATURE_FILE, FeatureSource, parse_feature_id
from devsy.devcontainer.json_fields import opt_dict, opt_list, opt_str, opt_tristate, str_list, str_map
from devsy.devcontainer.jsonc import json_type_name, load_jsonc
from devsy.devcontainer.lifecycle_commands import LifecycleCommand, parse_lifecycle_command
from devsy.devcontainer.mounts import parse_mount
from devsy.devcontainer.variables import SubstitutionContext, substitute
from devsy.driver.base import Mount
from devsy.errors import ConfigError

OptionValue = str | bool
OPTION_TYPES = {"boolean": bool, "string": str}
# The lifecycle commands a Feature may declare, by FeatureMetadata field (the spec's order).
FEATURE_LIFECYCLE = {"on_create_command": "onCreateCommand", "update_content_command": "updateContentCommand",
                     "post_create_command": "postCreateCommand", "post_start_command": "postStartCommand",
                     "post_attach_command": "postAttachCommand"}


@dataclass(frozen=True)
class FeatureOption:
    name: str
    type: str  # "boolean" | "string"
    default: OptionValue
    enum: tuple[str, ...] | None = None  # the only values allowed
    proposals: tuple[str, ...] = ()  # suggestions; any string is allowed


@dataclass(frozen=True)
class FeatureMetadata:
    """devcontainer-feature.json, typed. `depends_on` maps a Feature id to the options it asks for."""

    id: str
    version: str
    name: str = ""
    options: dict[str, FeatureOption] = field(default_factory=dict)
    container_env: dict[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    cap_add: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ()
    privileged: bool | None = None
    init: bool | None = None
    entrypoint: str | None = None
    installs_after: tuple[str, ...] = ()
    depends_on: dict[str, dict[str, OptionValue]] = field(default_factory=dict)
    on_create_command: LifecycleCommand | None = None
    update_content_command: LifecycleCommand | None = None
    post_create_command: LifecycleCommand | None = None
    post_start_command: LifecycleCommand | None = None
    post_attach_command: LifecycleCommand | None = None


@dataclass(frozen=True)
class UserFeature:
    """One entry of devcontainer.json's "features": where it comes from and the options as written (`version`: the
    string form's value, which is the "version" option only of a Feature that declares one: resolve_options)."""

    source: FeatureSource
    options: dict[str, OptionValue]
    version: str | None = None


@dataclass(frozen=True)
class ResolvedFeature:
    """A Feature ready to install: its folder and content digest, metadata, and every option's value."""

    source: FeatureSource
    folder: Path
    digest: str  # "sha256:..." of the Feature's content (local: of its files; fetched: what was fetched)
    metadata: FeatureMetadata
    options: dict[str, OptionValue]

    def files(self) -> dict[str, Path]:
        """The Feature's files to install (feature_files): symlinks may lead within the project's .devcontainer
        folder (local) or the Feature's own folder (fetched: its archive was extracted refusing links out of it)."""
        return feature_files(self.folder, self.source.local_root or self.folder, self.source.shown)

    def option_env(self) -> dict[str, str]:
        """The options as install.sh's environment."""
        return {option_env_name(name): _env_value(value) for name, value in sorted(self.options.items())}


def option_env_name(name: str) -> str:
    """The spec's environment variable name of option `name`."""
    return re.sub(r"^[\d_]+", "_", re.sub(r"[^\w]", "_", name, flags=re.ASCII)).upper()


def parse_user_features(raw: Any, config_dir: Path, where: str) -> list[UserFeature]:
    """devcontainer.json's "features" object, in the order written."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise ConfigError(f'{where}: "features" must be an object, got {json_type_name(raw)}',
                          hint='write "features": {"./my-feature": {}}')
    features = []
    for feature_id, value in raw.items():
        source = parse_feature_id(feature_id, config_dir)
        version = None
        if isinstance(value, str):
            options: dict[str, OptionValue] = {}
            version = value
        elif isinstance(value, dict):
            options = dict(value)
        else:
            raise ConfigError(f'{where}: Feature "{source.shown}" must be given an object of options or a version '
                              f"string, got {json_type_name(value)}", hint=f'write "{source.shown}": {{}}')
        features.append(UserFeature(source, options, version))
    return features


def parse_override_order(raw: Any, where: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(item, str) and item for item in raw):
        raise ConfigError(f'{where}: "overrideFeatureInstallOrder" must be an array of Feature ids',
                          hint='e.g. "overrideFeatureInstallOrder": ["./first", "ghcr.io/owner/features/second"]')
    return list(raw)


def load_metadata(folder: Path, feature_id: str, variables: SubstitutionContext | None = None, *,
                  root: Path | None = None) -> FeatureMetadata:
    """The devcontainer-feature.json of the Feature in `folder`; ConfigError naming `feature_id` when malformed.
    `variables`: the config's, substituted in the Feature's mounts (e.g. ${devcontainerId} in a volume's name).
    `root`: the folder its symlinks may lead into (feature_files; default `folder`); checked before any build."""
    path = folder / FEATURE_FILE
    if "install.sh" not in feature_files(folder, root or folder, feature_id):
        raise ConfigError(f'Feature "{feature_id}" has no install.sh in {folder}',
                          hint="every Feature needs an install.sh next to its devcontainer-feature.json")
    raw = load_jsonc(path)
    where = f'Feature "{feature_id}" ({path})'
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must hold a JSON object", hint="see containers.dev/implementors/features")
    for key in ("id", "version"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ConfigError(f'{where}: "{key}" must be a non-empty string',
                              hint=f'devcontainer-feature.json needs "id" and "version" (e.g. "1.0.0")')
    return FeatureMetadata(
        id=raw["id"], version=raw["version"], name=opt_str(raw, "name", where) or "",
        options={name: _option(name, value, where) for name, value in opt_dict(raw, "options", where).items()},
        container_env=_container_env(str_map(raw, "containerEnv", where), where),
        mounts=tuple(parse_mount(substitute(item, variables) if variables else item, f"{where}: mounts[{i}]")
                     for i, item in enumerate(opt_list(raw, "mounts", where))),
        cap_add=tuple(str_list(raw, "capAdd", where)), security_opt=tuple(str_list(raw, "securityOpt", where)),
        privileged=opt_tristate(raw, "privileged", where), init=opt_tristate(raw, "init", where),
        entrypoint=opt_str(raw, "entrypoint", where), installs_after=tuple(str_list(raw, "installsAfter", where)),
        depends_on={key: _depends_options(key, value, where) for key, value in opt_dict(raw, "dependsOn", where).items()},
        **{attr: parse_lifecycle_command(key, raw.get(key), where=where) for attr, key in FEATURE_LIFECYCLE.items()},
    )


def feature_files(folder: Path, root: Path, feature_id: str) -> dict[str, Path]:
    """The files of the Feature in `folder` by name relative to it, each the regular file whose content is installed.
    A symlink (file or folder) is followed when it leads inside `root`, and refused otherwise or when it dangles or
    loops: a Feature's install copies nothing else of the host into the image. Other special files are left out."""
    root = root.resolve()
    files: dict[str, Path] = {}

    def refuse(name: str, why: str) -> ConfigError:
        return ConfigError(f'Feature "{feature_id}": {name} in {folder} {why}',
                           hint=f"keep a Feature's files, and what its symlinks point to, inside {root}")

    def visit(directory: Path, prefix: str, chain: frozenset[Path]) -> None:
        try:
            entries = sorted(directory.iterdir())
        except OSError as exc:
            raise refuse(prefix or ".", f"cannot be read: {exc.strerror}") from None
        for entry in entries:
            name = f"{prefix}{entry.name}"
            try:
                real = entry.resolve()
            except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
                raise refuse(name, "is a symlink that loops") from None
            if entry.is_symlink() and not real.is_relative_to(root):
                raise refuse(name, f"is a symlink to {real}, outside the folder it may point into ({root})")
            if real.is_dir():
                if real in chain:
                    raise refuse(name, "is a symlink to a folder that contains it (a loop)")
                visit(entry, f"{name}/", chain | {real})
            elif real.is_file():
                files[name] = real
            elif entry.is_symlink():
                raise refuse(name, f"is a symlink to {real}, which does not exist")

    visit(folder, "", frozenset({folder.resolve()}))
    return files


def resolve_options(metadata: FeatureMetadata, given: dict[str, OptionValue], feature_id: str, *,
                    version: str | None = None) -> dict[str, OptionValue]:
    """Every declared option's value: the one `given` (checked against its declaration), else its default.
    `version`: the string form's value, the "version" option when the Feature declares one (else not used)."""
    if version is not None and "version" in metadata.options:
        given = {**given, "version": version}
    for name, value in given.items():
        option = metadata.options.get(name)
        if option is None:
            known = ", ".join(sorted(metadata.options)) or "none"
            raise ConfigError(f'Feature "{feature_id}" has no option "{name}" (its options: {known})',
                              hint=f'remove "{name}" from the Feature\'s options in devcontainer.json')
        if not isinstance(value, OPTION_TYPES[option.type]):
            raise ConfigError(f'Feature "{feature_id}": option "{name}" must be a {option.type}, '
                              f"got {json_type_name(value)}",
                              hint=f'write it as {"true or false" if option.type == "boolean" else "a string"}')
        if option.enum is not None and value not in option.enum:
            raise ConfigError(f'Feature "{feature_id}": option "{name}" must be one of {", ".join(option.enum)}',
                              hint=f'pick one of the values the Feature declares for "{name}"')
    return {name: given.get(name, option.default) for name, option in metadata.options.items()}


def _option(name: str, raw: Any, where: str) -> FeatureOption:
    label = f'{where}: option "{name}"'
    if not isinstance(raw, dict) or raw.get("type") not in OPTION_TYPES:
        raise ConfigError(f'{label} must be an object with "type": "boolean" or "string"',
                          hint='e.g. "options": {"version": {"type": "string", "default": "latest"}}')
    kind = raw["type"]
    default = raw.get("default", False if kind == "boolean" else "")
    if not isinstance(default, OPTION_TYPES[kind]):
        raise ConfigError(f'{label}: "default" must be a {kind}, got {json_type_name(default)}',
                          hint="make the default match the option's type")
    enum = raw.get("enum")
    if enum is not None and (kind != "string" or not isinstance(enum, list)
                             or not all(isinstance(item, str) for item in enum)):
        raise ConfigError(f'{label}: "enum" must be an array of strings of a string option',
                          hint='e.g. "enum": ["a", "b"]')
    proposals = raw.get("proposals") or []
    if not isinstance(proposals, list) or not all(isinstance(item, str) for item in proposals):
        raise ConfigError(f'{label}: "proposals" must be an array of strings', hint='e.g. "proposals": ["1", "2"]')
    return FeatureOption(name, kind, default, tuple(enum) if enum is not None else None, tuple(proposals))


# A Dockerfile instruction is one line: ENV cannot hold a line break (nor a NUL, which no environment holds).
_NOT_IN_ENV_VALUE = re.compile(r"[\n\r\x00]")
# ENV's name is an unquoted word: whitespace, quotes, "=", "\\" or "$" would be read as something else.
_ENV_NAME = re.compile(r"^[^\s=\"'\\$\x00-\x1f\x7f]+$")


def _container_env(env: dict[str, str], where: str) -> dict[str, str]:
    """containerEnv, refused when a name or value cannot be written as a Dockerfile ENV (layer.py) verbatim."""
    for name, value in env.items():
        if not _ENV_NAME.match(name):
            raise ConfigError(f'{where}: containerEnv name {name!r} is not a variable name',
                              hint="use letters, digits and _ in containerEnv names")
        if _NOT_IN_ENV_VALUE.search(value):
            raise ConfigError(f'{where}: containerEnv "{name}" holds a line break (or NUL), which a Dockerfile ENV '
                              "cannot hold", hint="write the value on one line (the Feature's install.sh can write "
                              "a multi-line value to a file instead)")
    return env


def _depends_options(key: str, value: Any, where: str) -> dict[str, OptionValue]:
    if isinstance(value, str):
        return {"version": value}
    if not isinstance(value, dict):
        raise ConfigError(f'{where}: dependsOn "{key}" must be an object of options',
                          hint=f'write "dependsOn": {{"{key}": {{}}}}')
    return dict(value)


def _env_value(value: OptionValue) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else value
