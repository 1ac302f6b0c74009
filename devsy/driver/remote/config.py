"""The provider config of a remote machine provider: `--provider remote --provider-option PROVIDER_CONFIG=FILE`.

FILE is YAML (or JSON) and must be an absolute path (later commands read it again from wherever they run):

    name: remote-docker
    agent:
      local: false                  # the backend runs on another machine, reached through `exec`
      home: ~/.devsy-agent          # the agent's home there: workspaces/, downloads/ (default shown)
      source:                       # optional: where this host gets the agent executable (default: built here)
        - {os: linux, arch: amd64, url: https://..., sha256: ...}
    exec:
      command: [docker, exec, -i, my-remote-host]   # runs a command there: the remote argv is appended, or, when
                                                     # an element holds ${COMMAND}, put there shell-quoted (ssh)
    runtime: DOCKER_PROVIDER        # the binary the agent runs the workspace through (Runtime Protocol v1)
    binaries:                       # downloaded once by the agent, copied into each workspace's folder
      DOCKER_PROVIDER:
        - {os: linux, arch: amd64, url: https://..., sha256: ...}
    options: {NETWORK_MODE: host}   # the runtime's options; --provider-option values override them

Every other `--provider-option` is one of the runtime's options (its environment, like external providers').
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devsy.driver.remote.errors import ProviderConfigError

CONFIG_OPTION = "PROVIDER_CONFIG"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class BinarySource:
    os: str
    arch: str
    url: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"os": self.os, "arch": self.arch, "url": self.url, "sha256": self.sha256}


@dataclass(frozen=True)
class RemoteProviderConfig:
    path: Path
    name: str
    exec_command: tuple[str, ...]
    runtime: str
    binaries: dict[str, tuple[BinarySource, ...]]
    agent_home: str = ""  # "" = the agent's default on the remote machine
    agent_sources: tuple[BinarySource, ...] = ()
    options: dict[str, str] = field(default_factory=dict)

    def binaries_json(self) -> dict[str, list[dict[str, str]]]:
        return {name: [s.to_json() for s in sources] for name, sources in sorted(self.binaries.items())}

    def agent_source_for(self, os_name: str, arch: str) -> BinarySource | None:
        return next((s for s in self.agent_sources if (s.os, s.arch) == (os_name, arch)), None)


@dataclass(frozen=True)
class RemoteSelection:
    """What `--provider remote` with its options resolves to."""

    config: RemoteProviderConfig
    runtime_env: dict[str, str]  # the runtime's options: the config's, overridden by --provider-option values


def parse_remote_options(options: Mapping[str, str]) -> RemoteSelection:
    raw = options.get(CONFIG_OPTION, "")
    if not raw:
        raise ProviderConfigError(f"--provider remote needs --provider-option {CONFIG_OPTION}=FILE",
                                  hint="point it at the provider config (YAML) of the remote machine")
    if not Path(raw).is_absolute():
        raise ProviderConfigError(f"{CONFIG_OPTION}={raw} is not an absolute path",
                                  hint="later commands read it again from any directory: give its absolute path")
    config = load_config(Path(raw))
    env = {**config.options, **{k: v for k, v in options.items() if k != CONFIG_OPTION}}
    return RemoteSelection(config, env)


def load_config(path: Path) -> RemoteProviderConfig:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProviderConfigError(f"cannot read provider config {path}: {exc.strerror or exc}",
                                  hint=f"check {CONFIG_OPTION}") from exc
    except yaml.YAMLError as exc:
        raise ProviderConfigError(f"provider config {path} is not valid YAML: {exc}", hint="fix the file") from exc
    return _parse(path, data)


def _parse(path: Path, data: Any) -> RemoteProviderConfig:
    def fail(field_name: str, problem: str) -> ProviderConfigError:
        return ProviderConfigError(f"provider config {path}: {field_name} {problem}",
                                   hint="see devsy/driver/remote/config.py for the format")

    if not isinstance(data, dict):
        raise fail("the top level", "is not a mapping")
    agent = data.get("agent") or {}
    if not isinstance(agent, dict):
        raise fail("agent", "is not a mapping")
    if agent.get("local", True) is not False:
        raise fail("agent.local", "must be false: this provider kind runs its backend on a remote machine "
                                  "(for a provider on this machine use --provider external:EXECUTABLE)")
    command = (data.get("exec") or {}).get("command") if isinstance(data.get("exec"), dict) else None
    if not isinstance(command, list) or not command or not all(isinstance(p, str) and p for p in command):
        raise fail("exec.command", "must be a non-empty list of strings (the argv that runs a command there)")
    binaries_raw = data.get("binaries")
    if not isinstance(binaries_raw, dict) or not binaries_raw:
        raise fail("binaries", "must map each binary's name to its list of {os, arch, url, sha256}")
    binaries = {}
    for name, entries in binaries_raw.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise fail(f"binaries.{name}", "is not a usable name (letters, digits, '_', '.', '-')")
        binaries[name] = _sources(f"binaries.{name}", entries, fail)
    runtime = data.get("runtime")
    if runtime not in binaries:
        raise fail("runtime", f"must name one of the binaries ({', '.join(sorted(binaries))})")
    options = data.get("options") or {}
    if not isinstance(options, dict):
        raise fail("options", "is not a mapping")
    home = agent.get("home", "")
    if not isinstance(home, str):
        raise fail("agent.home", "is not a string")
    sources = _sources("agent.source", agent["source"], fail) if agent.get("source") else ()
    return RemoteProviderConfig(path=path, name=str(data.get("name") or path.stem), exec_command=tuple(command),
                                runtime=str(runtime), binaries=binaries, agent_home=home, agent_sources=sources,
                                options={str(k): str(v) for k, v in options.items()})


def _sources(where: str, entries: Any, fail: Any) -> tuple[BinarySource, ...]:
    if not isinstance(entries, list) or not entries:
        raise fail(where, "must be a non-empty list of {os, arch, url, sha256}")
    found = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("os", "arch", "url",
                                                                                          "sha256")):
            raise fail(f"{where}[{index}]", "needs the strings os, arch, url and sha256")
        if not _SHA256.match(entry["sha256"]):
            raise fail(f"{where}[{index}].sha256", "is not 64 lowercase hex digits (as sha256sum prints it)")
        if not entry["url"].startswith(("http://", "https://")):
            raise fail(f"{where}[{index}].url", "is not an http(s) URL")
        found.append(BinarySource(entry["os"], entry["arch"], entry["url"], entry["sha256"]))
    return tuple(found)
