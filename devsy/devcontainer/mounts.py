"""devcontainer mount entries (Docker `--mount` strings or objects) parsed into driver Mounts.

A mount's source can be a secret (a host path or volume name), so no error here ever contains a source or the raw
entry: errors name the mount by its label (e.g. "mounts[2]") and its target.
"""

from __future__ import annotations

import csv
import os
import re
from typing import Any

from devsy.driver.base import Mount, MountType
from devsy.devcontainer.jsonc import json_type_name
from devsy.errors import ConfigError

_KEY_ALIASES = {
    "type": "type",
    "source": "source",
    "src": "source",
    "target": "target",
    "dst": "target",
    "destination": "target",
    "readonly": "readonly",
    "ro": "readonly",
    # Docker Desktop for macOS only; meaningless to every backend devsy drives.
    "consistency": "consistency",
}
_OBJECT_KEYS = ("type", "source", "target", "readonly")
_TRUE = {"true", "1"}
_FALSE = {"false", "0"}
# Anything else printed from an entry could be a misplaced source (e.g. "type=bind,/home/me/.ssh").
_SAFE_TOKEN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
_EXAMPLE = '"type=bind,source=${localWorkspaceFolder}/data,target=/data"'


def parse_mount(raw: Any, label: str) -> Mount:
    """Parse one mount (string or object); `label` names it in errors, e.g. "/ws/.devcontainer.json: mounts[0]"."""
    if isinstance(raw, str):
        pairs = _string_pairs(raw, label)
    elif isinstance(raw, dict):
        if not isinstance(raw.get("target", ""), str):
            raise ConfigError(
                f'{label}: "target" must be a string, got {json_type_name(raw["target"])}',
                hint='Set "target" to an absolute path in the container, e.g. "/data".',
            )
        pairs = list(raw.items())
    else:
        raise ConfigError(
            f"{label} must be a mount string or object, got {json_type_name(raw)}",
            hint=f"Write it as {_EXAMPLE} or as an object with type, source and target.",
        )
    target = _target(pairs)
    if not target:
        raise ConfigError(f"{label} has no target", hint="Add target=/path/in/container (aliases: dst, destination).")
    where = f"{label} (target {target})"
    fields = _string_fields(pairs, where) if isinstance(raw, str) else _object_fields(pairs, where)
    return _build(fields, target, where)


def _string_pairs(raw: str, label: str) -> list[tuple[str, str | None]]:
    # Docker reads --mount as one CSV record, so a quoted field may contain commas.
    try:
        parts = next(csv.reader([raw]), [])
    except csv.Error:
        raise ConfigError(f"{label}: the mount string is malformed", hint=f"Write it as {_EXAMPLE}.") from None
    pairs: list[tuple[str, str | None]] = []
    for part in parts:
        key, has_value, value = part.partition("=")
        if key.strip():
            pairs.append((key.strip().lower(), value.strip() if has_value else None))
    return pairs


def _target(pairs: list[tuple[str, Any]]) -> str:
    targets = [value for key, value in pairs if _KEY_ALIASES.get(key) == "target" and isinstance(value, str)]
    return targets[-1] if targets else ""


def _string_fields(pairs: list[tuple[str, str | None]], where: str) -> dict[str, str | bool]:
    fields: dict[str, str | bool] = {}
    for key, value in pairs:
        canonical = _KEY_ALIASES.get(key)
        if canonical is None:
            raise _unknown_option(key, where)
        if canonical == "readonly":
            fields["readonly"] = _read_only_flag(value, where)
        elif canonical != "consistency":
            fields[canonical] = value or ""
    return fields


def _object_fields(pairs: list[tuple[str, Any]], where: str) -> dict[str, str | bool]:
    fields: dict[str, str | bool] = {}
    for key, value in pairs:
        if key not in _OBJECT_KEYS:
            raise _unknown_option(key, where)
        if key == "readonly":
            if not isinstance(value, bool):
                raise ConfigError(
                    f'{where}: "readonly" must be true or false, got {json_type_name(value)}',
                    hint='Use "readonly": true or remove the key.',
                )
            fields["readonly"] = value
        elif not isinstance(value, str):
            raise ConfigError(
                f'{where}: "{key}" must be a string, got {json_type_name(value)}', hint=f'Quote the "{key}" value.'
            )
        else:
            fields[key] = value.strip()
    return fields


def _build(fields: dict[str, str | bool], target: str, where: str) -> Mount:
    if not target.startswith("/"):
        raise ConfigError(f"{where}: the target must be an absolute path", hint="Start the target with '/'.")
    mount_type = _mount_type(str(fields.get("type", MountType.VOLUME.value)), where)
    source = str(fields.get("source", ""))
    if mount_type is MountType.BIND:
        if not source:
            raise ConfigError(f"{where}: a bind mount needs a source", hint="Add source=/absolute/host/path.")
        if not os.path.isabs(source):
            raise ConfigError(
                f"{where}: the bind source must be an absolute host path",
                hint="Use an absolute path, e.g. source=${localWorkspaceFolder}/data or source=${localEnv:HOME}/x.",
            )
    if mount_type is MountType.TMPFS and source:
        raise ConfigError(f"{where}: a tmpfs mount takes no source", hint="Remove source= from the tmpfs mount.")
    return Mount(type=mount_type, target=target, source=source, read_only=bool(fields.get("readonly", False)))


def _mount_type(value: str, where: str) -> MountType:
    try:
        return MountType(value.lower())
    except ValueError:
        shown = f" '{value}'" if _SAFE_TOKEN.match(value) else ""
        raise ConfigError(
            f"{where}: unknown mount type{shown}",
            hint="Use type=bind, type=volume or type=tmpfs.",
        ) from None


def _read_only_flag(value: str | None, where: str) -> bool:
    if value is None:
        return True
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(
        f"{where}: readonly must be true or false", hint="Write readonly, readonly=true or readonly=false."
    )


def _unknown_option(key: str, where: str) -> ConfigError:
    shown = f" '{key}'" if _SAFE_TOKEN.match(key) else " without a recognised key"
    return ConfigError(
        f"{where} has an unsupported option{shown}",
        hint="Supported: type, source (src), target (dst, destination), readonly (ro), consistency. Remove the rest.",
    )
