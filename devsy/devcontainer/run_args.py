"""devcontainer.json `runArgs`: the documented subset of `docker run` options devsy maps onto the Driver's run options.

The reference CLI passes runArgs verbatim to `docker run`; devsy drives backends that are not a docker command line,
so it reads each option it can carry and refuses every other one by name (never dropping one silently):
  -e/--env NAME[=VALUE], -l/--label KEY[=VALUE], --cap-add CAP, --security-opt OPT, --privileged[=BOOL],
  --init[=BOOL], --add-host HOST:IP, --device PATH[:PATH[:PERMS]], --shm-size SIZE
each as `--flag value` (two entries) or `--flag=value` (one). Later entries win, as on docker's command line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from devsy.driver.base import LABEL_PREFIX
from devsy.errors import ConfigError

SUPPORTED = ("-e/--env", "-l/--label", "--cap-add", "--security-opt", "--privileged", "--init", "--add-host",
             "--device", "--shm-size")
# The ones the Runtime Protocol has no field for: only the built-in Docker driver applies them (backend_settings.py).
DOCKER_ONLY = ("--add-host", "--device", "--shm-size")
# docker's RAMInBytes: a number with an optional b, k, m or g unit (kb, mb, gb too), units of 1024.
_DOCKER_SIZE = re.compile(r"^(\d+)([bkmg]b?)?$", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30}
_TRUE_FALSE = {"true": True, "false": False}


@dataclass
class RunArgs:
    """What runArgs asked for, by Driver run option (only what was written; empty/None = not asked)."""

    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    cap_add: list[str] = field(default_factory=list)
    security_opt: list[str] = field(default_factory=list)
    privileged: bool | None = None
    init: bool | None = None
    extra_hosts: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    shm_size_bytes: int | None = None

    def docker_only(self) -> list[str]:
        """The options written that the Runtime Protocol cannot carry."""
        asked = {"--add-host": bool(self.extra_hosts), "--device": bool(self.devices),
                 "--shm-size": self.shm_size_bytes is not None}
        return [name for name in DOCKER_ONLY if asked[name]]


_Apply = Callable[[RunArgs, str, str, Mapping[str, str]], None]


def _env(run: RunArgs, value: str, where: str, host_env: Mapping[str, str]) -> None:
    name, sep, text = value.partition("=")
    if not name:
        raise ConfigError(f'{where}: "-e/--env" needs NAME=VALUE', hint='Write e.g. "-e", "NAME=value".')
    if sep:
        run.env[name] = text
    elif name in host_env:  # `-e NAME`: docker passes the host's value, and nothing when the host has none
        run.env[name] = host_env[name]


def _label(run: RunArgs, value: str, where: str, host_env: Mapping[str, str]) -> None:
    key, _, text = value.partition("=")
    if not key:
        raise ConfigError(f'{where}: "-l/--label" needs KEY=VALUE', hint='Write e.g. "--label", "team=web".')
    if key.startswith(LABEL_PREFIX):
        raise ConfigError(f'{where}: label "{key}" is in devsy\'s reserved namespace {LABEL_PREFIX}*',
                          hint="Use a label key outside that namespace.")
    run.labels[key] = text


def _add_host(run: RunArgs, value: str, where: str, host_env: Mapping[str, str]) -> None:
    # docker splits at the first ':' (an IPv6 address keeps its own colons); newer engines also take '='.
    sep = "=" if "=" in value else ":"
    host, _, address = value.partition(sep)
    if not host or not address:
        raise ConfigError(f'{where}: "--add-host" needs HOST:IP, got "{value}"',
                          hint='Write e.g. "--add-host", "db.local:127.0.0.1".')
    run.extra_hosts.append(f"{host}:{address}")


def _device(run: RunArgs, value: str, where: str, host_env: Mapping[str, str]) -> None:
    if not value.startswith("/"):
        raise ConfigError(f'{where}: "--device" needs a device path, got "{value}"',
                          hint='Write e.g. "--device", "/dev/fuse" (or "/dev/x:/dev/y:rwm").')
    run.devices.append(value)


def _shm_size(run: RunArgs, value: str, where: str, host_env: Mapping[str, str]) -> None:
    match = _DOCKER_SIZE.match(value.strip())
    if match is None or int(match.group(1)) == 0:
        raise ConfigError(f'{where}: "--shm-size" must be a size such as "256m" or "1g", got "{value}"',
                          hint="Use a positive whole number with an optional b, k, m or g suffix (units of 1024).")
    unit = match.group(2)
    run.shm_size_bytes = int(match.group(1)) * (_SIZE_UNITS[unit[0].lower()] if unit else 1)


def _append(attr: str) -> _Apply:
    def apply(run: RunArgs, value: str, where: str, host_env: Mapping[str, str]) -> None:
        if not value.strip():
            raise ConfigError(f"{where}: the value is empty", hint="Give the option a value or remove it.")
        getattr(run, attr).append(value)
    return apply


def _flag(attr: str) -> Callable[[RunArgs, bool], None]:
    return lambda run, on: setattr(run, attr, on)


# Options that take a value (`--flag value` or `--flag=value`), by every name docker accepts for them.
_VALUED: dict[str, _Apply] = {
    "-e": _env, "--env": _env, "-l": _label, "--label": _label, "--cap-add": _append("cap_add"),
    "--security-opt": _append("security_opt"), "--add-host": _add_host, "--device": _device, "--shm-size": _shm_size,
}
# Boolean options: bare means true; `--flag=true|false` (docker's bool flags never take a separate value).
_BOOLEAN: dict[str, Callable[[RunArgs, bool], None]] = {"--privileged": _flag("privileged"), "--init": _flag("init")}


def parse_run_args(items: list[str], path: Path, host_env: Mapping[str, str]) -> RunArgs:
    """`runArgs` (already type-checked as strings) read into RunArgs; ConfigError naming the first unsupported one."""
    run = RunArgs()
    i = 0
    while i < len(items):
        item = items[i]
        where = f'{path}: "runArgs[{i}]"'
        name, sep, inline = item.partition("=") if item.startswith("--") else (item, "", "")
        if item.startswith("-") and not item.startswith("--") and len(item) > 2 and item[:2] in _VALUED:
            name, sep, inline = item[:2], "=", item[2:].removeprefix("=")  # -eNAME=VALUE, -e=NAME=VALUE
        if name in _VALUED:
            if not sep:
                if i + 1 >= len(items):
                    raise ConfigError(f'{where}: "{name}" needs a value', hint=f'Add its value after "{name}".')
                i += 1
                inline = items[i]
            _VALUED[name](run, inline, where, host_env)
        elif name in _BOOLEAN:
            if sep and inline.lower() not in _TRUE_FALSE:
                raise ConfigError(f'{where}: "{name}" takes true or false, got "{inline}"',
                                  hint=f'Write "{name}" or "{name}=false".')
            _BOOLEAN[name](run, _TRUE_FALSE[inline.lower()] if sep else True)
        else:
            raise _unsupported(where, item)
        i += 1
    return run


def _unsupported(where: str, item: str) -> ConfigError:
    # Only the option's name is shown: what follows '=' may be anything, a secret included.
    shown = item.partition("=")[0] if item.startswith("-") else item[:40]
    what = f'"{shown}" is not supported' if item.startswith("-") else f'"{shown}" is not an option devsy can read'
    return ConfigError(f"{where}: {what} (devsy applies runArgs it can map onto its drivers: {', '.join(SUPPORTED)})",
                       hint="Remove it from runArgs, or use the devcontainer.json property for it (e.g. capAdd, "
                            "securityOpt, privileged, init, containerEnv, mounts) where there is one.")
