"""${...} variable substitution in devcontainer.json values, as the devcontainer spec defines it.

Follows the reference CLI (devcontainers/cli src/spec-common/variableSubstitution.ts): a variable it does not know, or
one whose value cannot be known yet (a field left None here), stays as written; ${localEnv}/${containerEnv} without a
variable name is an error. Substitution happens twice: with what the host knows when the config is loaded, then with
the container's environment once the instance exists (${containerEnv:...}, see `container_substitute`).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any

from devsy.errors import ConfigError

_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_BASE32_DIGITS = "0123456789abcdefghijklmnopqrstuv"  # JavaScript's BigInt.toString(32)


@dataclass(frozen=True)
class SubstitutionContext:
    """What variables resolve to. A None field leaves its variable as written (it cannot be known yet)."""

    local_workspace_folder: str
    env: Mapping[str, str]
    devcontainer_id: str | None = None
    container_workspace_folder: str | None = None
    container_env: Mapping[str, str] | None = None  # the running instance's environment, once it exists
    where: str = "devcontainer.json"  # names the file in errors

    def with_container_workspace_folder(self, folder: str) -> SubstitutionContext:
        return replace(self, container_workspace_folder=folder)


def substitute(value: Any, ctx: SubstitutionContext) -> Any:
    """Replace known ${...} variables in every string of `value` (str, list or dict values); unknown ones stay as-is."""
    if isinstance(value, str):
        return _VARIABLE.sub(lambda match: _resolve(match, ctx), value)
    if isinstance(value, list):
        return [substitute(item, ctx) for item in value]
    if isinstance(value, dict):
        # Keys are names (env var names, option names), never substituted: the spec only defines values.
        return {key: substitute(item, ctx) for key, item in value.items()}
    return value


def container_substitute(value: Any, container_env: Mapping[str, str], *, where: str = "devcontainer.json") -> Any:
    """Resolve only ${containerEnv:...} in `value` (the reference's containerSubstitute); everything else stays."""
    return _VARIABLE.sub(lambda m: _container_only(m, container_env, where), value) if isinstance(value, str) else (
        [container_substitute(v, container_env, where=where) for v in value] if isinstance(value, list) else
        {k: container_substitute(v, container_env, where=where) for k, v in value.items()}
        if isinstance(value, dict) else value)


def uses_container_env(value: Any) -> bool:
    """Whether `value` mentions ${containerEnv:...} anywhere (reading the instance's environment costs an exec)."""
    if isinstance(value, str):
        return any(m.group(1).split(":", 1)[0] == "containerEnv" for m in _VARIABLE.finditer(value))
    if isinstance(value, list):
        return any(uses_container_env(item) for item in value)
    if isinstance(value, dict):
        return any(uses_container_env(item) for item in value.values())
    return False


def devcontainer_id_for_labels(labels: Mapping[str, str]) -> str:
    """${devcontainerId}: the reference's id of the labels that identify an instance across rebuilds.

    sha256 of the labels as compact JSON with sorted keys, written in base 32 (digits 0-9a-v), 52 characters."""
    text = json.dumps({key: labels[key] for key in sorted(labels)}, separators=(",", ":"), ensure_ascii=False)
    number = int.from_bytes(hashlib.sha256(text.encode()).digest(), "big")
    digits = ""
    while number:
        number, rest = divmod(number, 32)
        digits = _BASE32_DIGITS[rest] + digits
    return digits.rjust(52, "0")


def _container_only(match: re.Match[str], container_env: Mapping[str, str], where: str) -> str:
    name, _, argument = match.group(1).partition(":")
    return _lookup_env(match, argument, container_env, where) if name == "containerEnv" else match.group(0)


def _resolve(match: re.Match[str], ctx: SubstitutionContext) -> str:
    name, colon, argument = match.group(1).partition(":")
    if name in ("localEnv", "env"):
        return _lookup_env(match, argument, ctx.env, ctx.where)
    if name == "containerEnv":
        if ctx.container_env is None:
            return match.group(0) if argument else _no_name(match, ctx.where)
        return _lookup_env(match, argument, ctx.container_env, ctx.where)
    if colon:
        return match.group(0)
    simple = {
        "localWorkspaceFolder": ctx.local_workspace_folder,
        "localWorkspaceFolderBasename": PurePath(ctx.local_workspace_folder).name,
        "containerWorkspaceFolder": ctx.container_workspace_folder,
        "containerWorkspaceFolderBasename": (
            None if ctx.container_workspace_folder is None else posixpath.basename(ctx.container_workspace_folder)
        ),
        "devcontainerId": ctx.devcontainer_id,
    }.get(name)
    return match.group(0) if simple is None else simple


def _lookup_env(match: re.Match[str], argument: str, env: Mapping[str, str], where: str) -> str:
    # `${localEnv:NAME:default}`: the default is everything after the second colon, so defaults such as URLs
    # ("http://host:80") survive (the reference keeps only up to the third colon; devsy keeps the whole rest). An
    # unset variable without a default is "" (as the reference does), and a variable set to "" stays "" (the
    # default applies only when it is unset).
    var_name, has_default, default = argument.partition(":")
    if not var_name:
        return _no_name(match, where)
    value = env.get(var_name)
    if value is not None:
        return value
    return default if has_default else ""


def _no_name(match: re.Match[str], where: str) -> str:
    raise ConfigError(f"{where}: '{match.group(0)}' cannot be resolved: no environment variable name is given",
                      hint=f"Name the variable, e.g. '${{{match.group(1).split(':')[0]}:HOME}}'.")
