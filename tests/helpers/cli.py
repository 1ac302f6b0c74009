"""Run the real `devsy` CLI in a subprocess with its own DEVSY_HOME and ssh config file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

DEVSY = [sys.executable, "-m", "devsy"]
# Every container a test creates gets host networking: these machines' engine runs without a bridge.
HOST_NET = ["--provider-option", "NETWORK_MODE=host"]


@dataclass
class CliResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.stdout)

    @property
    def text(self) -> str:
        return self.stdout.decode() + self.stderr.decode()


@dataclass
class DevsyCli:
    """Runs the real CLI in a subprocess with its own DEVSY_HOME and ssh config file."""

    home: Path
    ssh_config: Path
    env: dict[str, str] = field(default_factory=dict)
    created: set[str] = field(default_factory=set)

    def run(self, *args: str, input: bytes | None = None, timeout: float = 180, extra_env: dict | None = None,
            ) -> CliResult:
        env = {**os.environ, "DEVSY_HOME": str(self.home), "DEVSY_SSH_CONFIG": str(self.ssh_config), **self.env,
               **(extra_env or {})}
        proc = subprocess.run([*DEVSY, *args], input=input if input is not None else b"", capture_output=True,
                              env=env, timeout=timeout)
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    def up(self, source: str | Path, *args: str, ok: bool = True, **kw) -> CliResult:
        result = self.run("up", str(source), *args, "--json", **kw)
        if "--id" in args:
            self.created.add(args[args.index("--id") + 1])
        if ok:
            assert result.returncode == 0, result.text
        return result


def cli_env(devsy: DevsyCli, **extra: str) -> dict[str, str]:
    """The environment `devsy.run` uses, for tests that start the CLI with subprocess.Popen themselves."""
    return {**os.environ, "DEVSY_HOME": str(devsy.home), "DEVSY_SSH_CONFIG": str(devsy.ssh_config), **devsy.env,
            **extra}
