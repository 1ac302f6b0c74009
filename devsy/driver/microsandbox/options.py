"""Provider options of the MicroSandbox driver, validated before anything is created (MICROSANDBOX.md).

Option values come from the user's environment and may be secrets, so no error ever quotes one: errors name the
option and say what a valid value looks like. An empty value means "use the runtime default"; nothing invalid is
silently replaced by a default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from devsy.errors import UsageError

UINT32_MAX = 2**32 - 1
MAX_CPUS = 255
HOST_PERMISSIONS = ("mirror", "private")
STAT_VIRTUALIZATION = ("strict", "relaxed", "off")
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")

OPTION_HELP = {
    "MICROSANDBOX_MEMORY": "guest memory in MiB (default 2048)",
    "MICROSANDBOX_CPUS": "virtual CPUs (1..255; default: hostRequirements.cpus, else the runtime's)",
    "MICROSANDBOX_MAX_MEMORY": "boot-time maximum hotpluggable memory in MiB (at least the memory)",
    "MICROSANDBOX_MAX_CPUS": "boot-time maximum virtual CPUs (1..255, at least the CPUs)",
    "MICROSANDBOX_STORAGE": "root disk size in GiB (OCI images only)",
    "MICROSANDBOX_BLOCK_EGRESS": "true to deny all outbound network traffic",
    "MICROSANDBOX_EPHEMERAL": "true to keep the root disk in memory (tmpfs); it is lost on stop",
    "MICROSANDBOX_WORKSPACE_HOST_PERMISSIONS": "mirror (chmod/chown reach the host) or private",
    "MICROSANDBOX_WORKSPACE_STAT_VIRTUALIZATION": "strict, relaxed or off (off cannot be combined with mirror)",
    "INACTIVITY_TIMEOUT": "stop the VM after this long without activity, e.g. 30m, 1h30m, 90s (0 = never)",
}


@dataclass(frozen=True)
class MicrosandboxOptions:
    memory_mib: int | None = None
    cpus: int | None = None
    max_memory_mib: int | None = None
    max_cpus: int | None = None
    storage_gib: int | None = None
    block_egress: bool = False
    ephemeral: bool = False
    host_permissions: str | None = None
    stat_virtualization: str | None = None
    inactivity_timeout_s: int | None = None


def parse_microsandbox_options(raw: Mapping[str, str]) -> MicrosandboxOptions:
    """Validate `--provider-option` values; an unknown name or a bad value is a UsageError naming the option."""
    unknown = sorted(set(raw) - set(OPTION_HELP))
    if unknown:
        raise UsageError(f"unknown microsandbox provider option {', '.join(unknown)}",
                         hint="valid options: " + "; ".join(f"{k} ({v})" for k, v in OPTION_HELP.items()))
    host_permissions = _choice(raw, "MICROSANDBOX_WORKSPACE_HOST_PERMISSIONS", HOST_PERMISSIONS)
    stat_virtualization = _choice(raw, "MICROSANDBOX_WORKSPACE_STAT_VIRTUALIZATION", STAT_VIRTUALIZATION)
    if stat_virtualization == "off" and host_permissions == "mirror":
        raise UsageError(
            "invalid microsandbox provider options: MICROSANDBOX_WORKSPACE_STAT_VIRTUALIZATION=off cannot be "
            "combined with MICROSANDBOX_WORKSPACE_HOST_PERMISSIONS=mirror",
            hint="without stat virtualization chmod already acts on the host files: drop one of the two options",
        )
    return MicrosandboxOptions(
        memory_mib=_count(raw, "MICROSANDBOX_MEMORY", UINT32_MAX, "MiB"),
        cpus=_count(raw, "MICROSANDBOX_CPUS", MAX_CPUS, "CPUs"),
        max_memory_mib=_count(raw, "MICROSANDBOX_MAX_MEMORY", UINT32_MAX, "MiB"),
        max_cpus=_count(raw, "MICROSANDBOX_MAX_CPUS", MAX_CPUS, "CPUs"),
        storage_gib=_count(raw, "MICROSANDBOX_STORAGE", UINT32_MAX, "GiB"),
        block_egress=_flag(raw, "MICROSANDBOX_BLOCK_EGRESS"),
        ephemeral=_flag(raw, "MICROSANDBOX_EPHEMERAL"),
        host_permissions=host_permissions,
        stat_virtualization=stat_virtualization,
        inactivity_timeout_s=_duration(raw, "INACTIVITY_TIMEOUT"),
    )


def _invalid(name: str, expected: str) -> UsageError:
    return UsageError(f"invalid microsandbox provider option {name}: {expected}",
                      hint=f"set {name} to {expected}, or leave it empty for the default ({OPTION_HELP[name]})")


def _count(raw: Mapping[str, str], name: str, high: int, unit: str) -> int | None:
    text = raw.get(name, "").strip()
    if not text:
        return None
    # Digits only: int() would also take "+5", " 5" or "1_000", which no other tool reads the same way.
    value = int(text) if text.isascii() and text.isdigit() else None
    if value is None or not 1 <= value <= high:
        raise _invalid(name, f"a whole number of {unit} between 1 and {high}")
    return value


def _flag(raw: Mapping[str, str], name: str) -> bool:
    text = raw.get(name, "").strip().lower()
    if text in ("", *_FALSE):
        return False
    if text in _TRUE:
        return True
    raise _invalid(name, "true or false")


def _choice(raw: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    text = raw.get(name, "").strip().lower()
    if not text:
        return None
    if text not in allowed:
        raise _invalid(name, f"one of {', '.join(allowed)}")
    return text


def _duration(raw: Mapping[str, str], name: str) -> int | None:
    """Whole seconds, from `90`, `90s`, `30m`, `1h30m`; msb takes one unit only, so devsy converts to seconds."""
    text = raw.get(name, "").strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():
        seconds = int(text)
    else:
        match = _DURATION.fullmatch(text)
        if match is None or not any(match.groups()):
            raise _invalid(name, "a duration of at least 0 such as 90s, 30m or 1h30m")
        hours, minutes, secs = (int(group or 0) for group in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if seconds > UINT32_MAX:
        raise _invalid(name, f"a duration of at most {UINT32_MAX} seconds")
    return seconds
