"""Typed reads of one JSON object's fields (devcontainer.json, devcontainer-feature.json): a wrong type is a
ConfigError naming the file and key, never the value (values such as env entries may be secrets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devsy.devcontainer.jsonc import json_type_name
from devsy.errors import ConfigError


def type_error(path: Path | str, key: str, expected: str, value: object) -> ConfigError:
    # Only the type is named: values (env, args) may be secrets.
    return ConfigError(
        f'{path}: "{key}" must be {expected}, got {json_type_name(value)}',
        hint=f'Change "{key}" to {expected}, or remove it.',
    )


def opt_str(raw: dict[str, Any], key: str, path: Path | str, prefix: str = "") -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise type_error(path, prefix + key, "a string", value)
    return value


def opt_bool(raw: dict[str, Any], key: str, path: Path | str, *, default: bool) -> bool:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise type_error(path, key, "true or false", value)
    return value


def opt_tristate(raw: dict[str, Any], key: str, path: Path | str) -> bool | None:
    """A bool whose absence means "the backend's default" (kept apart from an explicit false)."""
    value = raw.get(key)
    if value is not None and not isinstance(value, bool):
        raise type_error(path, key, "true or false", value)
    return value


def str_list(raw: dict[str, Any], key: str, path: Path | str) -> list[str]:
    items = opt_list(raw, key, path)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise type_error(path, f"{key}[{index}]", "a string", item)
        if not item.strip():
            raise ConfigError(f'{path}: "{key}[{index}]" is empty', hint=f'Remove the empty entry from "{key}".')
    return list(items)


def opt_list(raw: dict[str, Any], key: str, path: Path | str) -> list[Any]:
    value = raw.get(key)
    if value is not None and not isinstance(value, list):
        raise type_error(path, key, "an array", value)
    return value or []


def opt_dict(raw: dict[str, Any], key: str, path: Path | str, prefix: str = "") -> dict[str, Any]:
    value = raw.get(key)
    if value is not None and not isinstance(value, dict):
        raise type_error(path, prefix + key, "an object", value)
    return value or {}


def str_map(raw: dict[str, Any], key: str, path: Path | str, prefix: str = "") -> dict[str, str]:
    section = opt_dict(raw, key, path, prefix)
    for name, value in section.items():
        if not isinstance(value, str):
            raise type_error(path, f"{prefix}{key}.{name}", "a string", value)
    return dict(section)


def env_map(raw: dict[str, Any], key: str, path: Path | str) -> dict[str, str | None]:
    """remoteEnv: strings, or null for "unset this variable" (the spec's meaning of null)."""
    section = opt_dict(raw, key, path)
    for name, value in section.items():
        if value is not None and not isinstance(value, str):
            raise type_error(path, f"{key}.{name}", "a string or null", value)
    return dict(section)
