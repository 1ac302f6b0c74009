"""Helpers for tests and benchmarks that drive providers as a host does (not used by devsy itself)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devsy.runtime.host.client import RuntimeClient
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.plugin_client import LaunchOptions, PluginClient
from devsy.runtime.wire.constants import SERVE_ARG

BIN_DIR = Path(sys.executable).parent


def script(name: str) -> str:
    """The installed console script `name` next to this interpreter (tests need not have the venv on PATH)."""
    return str(BIN_DIR / name)


def fake_command(state_dir: Path, *args: str, env: dict[str, str] | None = None) -> ProviderCommand:
    return ProviderCommand(binary=script("devsy-fake-runtime"), args=[SERVE_ARG, "--state-dir", str(state_dir), *args],
                           env=dict(env or {}))


def docker_command(network_mode: str = "host") -> ProviderCommand:
    return ProviderCommand(binary=script("devsy-provider-docker"), args=[SERVE_ARG], env={"NETWORK_MODE": network_mode})


@dataclass
class RunningProvider:
    plugin: PluginClient
    client: RuntimeClient


@contextlib.contextmanager
def running(command: ProviderCommand, options: LaunchOptions = LaunchOptions()) -> Iterator[RunningProvider]:
    """A launched provider and a typed client on it; torn down on exit."""
    plugin = PluginClient.launch(command, options)
    try:
        yield RunningProvider(plugin, RuntimeClient(plugin.stub, plugin.name, command.redactor()))
    finally:
        plugin.close()
