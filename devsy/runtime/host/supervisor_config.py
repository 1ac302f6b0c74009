"""What the host tells the supervisor through the config pipe: never argv, never disk (env may hold secrets)."""

from __future__ import annotations

import json

from devsy.runtime.wire.constants import is_transport_key

MAX_CONFIG_BYTES = 4 * 1024 * 1024


class ConfigError(ValueError):
    pass


class SupervisorConfig:
    """A plain class, not a dataclass: the supervisor imports this before it starts the provider, and dataclasses
    (with inspect) would add 6 ms to every provider launch."""

    def __init__(self, binary: str, args: list[str] | None = None, env: dict[str, str] | None = None, cwd: str = "",
                 transport: dict[str, str] | None = None) -> None:
        self.binary = binary
        self.args = args or []
        self.env = env or {}
        self.cwd = cwd
        # Appended after `env`, so user env can never override the cookie or a PLUGIN_* variable.
        self.transport = transport or {}

    def to_json(self) -> bytes:
        return json.dumps({"binary": self.binary, "args": self.args, "env": self.env, "cwd": self.cwd,
                           "transport": self.transport}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> SupervisorConfig:
        try:
            raw = json.loads(data)
        except ValueError as exc:
            raise ConfigError(f"the config is not JSON: {exc}") from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("binary"), str) or not raw["binary"]:
            raise ConfigError("the config names no provider binary")
        config = cls(binary=raw["binary"], args=raw.get("args") or [], env=raw.get("env") or {},
                     cwd=raw.get("cwd") or "", transport=raw.get("transport") or {})
        if not all(isinstance(a, str) for a in config.args):
            raise ConfigError("config args must be strings")
        for mapping in (config.env, config.transport):
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
                raise ConfigError("config env and transport must map strings to strings")
        bad = [k for k in config.transport if not is_transport_key(k)]
        if bad:
            raise ConfigError(f"transport variables must be the cookie or PLUGIN_*; got {', '.join(sorted(bad))}")
        return config

    def provider_env(self) -> dict[str, str]:
        """The provider's environment: user env without any transport variable, then the transport ones."""
        env = {k: v for k, v in self.env.items() if not is_transport_key(k)}
        env.update(self.transport)
        return env
