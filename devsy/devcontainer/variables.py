"""${...} variable substitution in devcontainer.json values, as the devcontainer spec defines it."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

_VARIABLE = re.compile(r"\$\{([^}]*)\}")


@dataclass(frozen=True)
class SubstitutionContext:
    """What variables resolve to. A None field leaves its variable as written (it cannot be known yet)."""

    local_workspace_folder: str
    env: Mapping[str, str]
    devcontainer_id: str | None = None
    container_workspace_folder: str | None = None

    def with_container_workspace_folder(self, folder: str) -> SubstitutionContext:
        return SubstitutionContext(self.local_workspace_folder, self.env, self.devcontainer_id, folder)


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


def _resolve(match: re.Match[str], ctx: SubstitutionContext) -> str:
    name, _, argument = match.group(1).partition(":")
    if name in ("localEnv", "env") and argument:
        return _lookup_env(argument, ctx.env)
    if argument:
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


def _lookup_env(argument: str, env: Mapping[str, str]) -> str:
    # `${localEnv:NAME:default}`: the default is everything after the second colon, so defaults such as URLs
    # ("http://host:80") survive. An unset variable without a default is "" (the devcontainers CLI does the same),
    # and a variable set to "" stays "" (the default applies only when it is unset).
    var_name, has_default, default = argument.partition(":")
    value = env.get(var_name)
    if value is not None:
        return value
    return default if has_default else ""
