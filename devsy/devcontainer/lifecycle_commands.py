"""Lifecycle commands (initializeCommand .. postAttachCommand) normalised to argv lists, and `waitFor`.

The spec allows three forms: a string (run by a shell), an array (an argv, no shell), or an object of named strings or
arrays. The object's entries run in parallel, as the spec says; each entry's output lines carry its name and a
failure names the entry, so they stay attributable (devsy/devcontainer/hooks.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devsy.devcontainer.jsonc import json_type_name
from devsy.errors import ConfigError

SHELL = ("/bin/sh", "-c")

# The spec's order. initializeCommand runs on the host before anything is created; the others in the container.
LIFECYCLE_HOOKS = ("initializeCommand", "onCreateCommand", "updateContentCommand", "postCreateCommand",
                   "postStartCommand", "postAttachCommand")
DEFAULT_WAIT_FOR = "updateContentCommand"


@dataclass(frozen=True)
class LifecycleCommand:
    """One lifecycle hook: `commands` holds (label, argv) pairs; labels name them in output and errors. `parallel`:
    the object form, whose entries run at the same time."""

    name: str
    commands: tuple[tuple[str, list[str]], ...]
    parallel: bool = False

    def argvs(self) -> list[tuple[str, list[str]]]:
        """(label, argv) pairs ready to exec; fresh lists, so callers cannot alter the parsed config."""
        return [(label, list(argv)) for label, argv in self.commands]


def parse_lifecycle_command(name: str, raw: Any, *, where: str = "devcontainer.json") -> LifecycleCommand | None:
    """Normalise one hook value; None when it is absent or has nothing to run. `where` names the file in errors."""
    if raw is None:
        return None
    if isinstance(raw, dict):
        commands: list[tuple[str, list[str]]] = []
        for key, value in raw.items():
            argv = _argv(value, f"{name}.{key}", where, allow_null=True)
            if argv:
                commands.append((f"{name}:{key}", argv))
    else:
        argv = _argv(raw, name, where, allow_null=False)
        commands = [(name, argv)] if argv else []
    return LifecycleCommand(name, tuple(commands), parallel=isinstance(raw, dict)) if commands else None


def parse_wait_for(raw: Any, *, where: str = "devcontainer.json") -> str:
    """The hook `devsy up` waits for (spec default updateContentCommand); a value outside the spec's enum is refused."""
    if raw is None:
        return DEFAULT_WAIT_FOR
    if not isinstance(raw, str) or raw not in LIFECYCLE_HOOKS:
        raise ConfigError(
            f'{where}: "waitFor" must be one of {", ".join(LIFECYCLE_HOOKS)}',
            hint=f'Name a lifecycle hook, e.g. "waitFor": "{DEFAULT_WAIT_FOR}" (the default).',
        )
    return raw


def _argv(value: Any, key: str, where: str, *, allow_null: bool) -> list[str]:
    if isinstance(value, str):
        # An empty command is a no-op rather than an error: templates often ship "postCreateCommand": "".
        return [*SHELL, value] if value.strip() else []
    if isinstance(value, list):
        if not all(isinstance(item, str) for item in value):
            raise ConfigError(
                f'{where}: "{key}" must be an array of strings',
                hint=f'Quote every element of "{key}", e.g. ["make", "setup"].',
            )
        return list(value)
    if value is None and allow_null:
        return []
    allowed = "a string or an array of strings" if allow_null else "a string, an array of strings or an object"
    raise ConfigError(
        f'{where}: "{key}" must be {allowed}, got {json_type_name(value)}',
        hint=f'Write "{key}" as "make setup" (run by /bin/sh -c) or ["make", "setup"] (run directly).',
    )
