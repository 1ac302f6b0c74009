"""Run the real `devsy` CLI as a subprocess: the one runner behind the harness's DevsyHandle and the tests' DevsyCli.

Each call gets DEVSY_HOME and DEVSY_SSH_CONFIG pointing at the caller's own directories (so parallel runs never
share state or ~/.ssh/config), runs in its own process group, and is bounded: at its timeout the whole group is
killed and CommandTimeout raised with the output tails.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from harness.commands import CompletedCommand, run_bounded, tail

DEVSY = [sys.executable, "-m", "devsy"]


class CommandTimeout(AssertionError):
    """A devsy command ran past its timeout and its process group was killed."""


def devsy_env(home: Path, ssh_config: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """devsy's environment: ours, plus `extra`, with DEVSY_HOME and DEVSY_SSH_CONFIG always the caller's."""
    return {**os.environ, **(extra or {}), "DEVSY_HOME": str(home), "DEVSY_SSH_CONFIG": str(ssh_config)}


def run_devsy(cli: list[str], args: tuple[str, ...] | list[str], *, home: Path, ssh_config: Path, timeout: float,
              env: Mapping[str, str] | None = None, input_bytes: bytes | None = None) -> CompletedCommand:
    """`CLI ARGS...` with devsy_env(home, ssh_config, env), `input_bytes` on stdin (None: /dev/null); at `timeout`
    its process group is killed and the result says timed_out (see raise_if_timed_out)."""
    return run_bounded([*cli, *args], timeout=timeout, env=devsy_env(home, ssh_config, env), input_bytes=input_bytes)


def raise_if_timed_out(completed: CompletedCommand, timeout: float, summary: str) -> CompletedCommand:
    if completed.timed_out:
        raise CommandTimeout(f"{summary} (timeout {timeout:.0f}s; process group killed)\n"
                             f"stderr tail:\n{tail(completed.stderr)}")
    return completed
