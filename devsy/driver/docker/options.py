"""Provider options of the built-in Docker provider, validated before anything is created."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from devsy.errors import UsageError

NETWORK_MODES = ("default", "host", "none", "bridge")

# name -> help text; the CLI prints these in `devsy up --help` and in errors about unknown options.
OPTION_HELP = {
    "NETWORK_MODE": "container network: default (the engine's), host, none or bridge",
    "STOP_TIMEOUT": "seconds `devsy stop` waits for the workload before killing it (integer 0..600, default 10)",
}


@dataclass(frozen=True)
class DockerOptions:
    network_mode: str = "default"
    stop_timeout: int = 10


def parse_docker_options(raw: Mapping[str, str]) -> DockerOptions:
    """Validate `--provider-option` values; an unknown name or bad value is a UsageError naming the option."""
    unknown = sorted(set(raw) - set(OPTION_HELP))
    if unknown:
        raise UsageError(
            f"unknown docker provider option {', '.join(unknown)}",
            hint="valid options: " + "; ".join(f"{k} ({v})" for k, v in OPTION_HELP.items()),
        )
    network_mode = raw.get("NETWORK_MODE", "") or "default"
    if network_mode not in NETWORK_MODES:
        raise UsageError(
            # Like every option error, it names the option, never the value (a value may be a secret).
            "invalid docker provider option NETWORK_MODE: not a network mode devsy supports",
            hint=f"use one of: {', '.join(NETWORK_MODES)}",
        )
    stop_timeout = _bounded_int("STOP_TIMEOUT", raw.get("STOP_TIMEOUT", ""), default=10, low=0, high=600)
    return DockerOptions(network_mode=network_mode, stop_timeout=stop_timeout)


def _bounded_int(name: str, text: str, *, default: int, low: int, high: int) -> int:
    if text == "":
        return default
    try:
        value = int(text, 10)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise UsageError(
            f"invalid docker provider option {name}: not an integer in {low}..{high}",
            hint=f"set {name} to a whole number between {low} and {high}, or leave it empty for {default}",
        )
    return value
