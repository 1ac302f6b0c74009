"""The tests' handle on the real `devsy` CLI: harness/devsy_cli.py's runner with a test's own DEVSY_HOME."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.commands import CompletedCommand
from harness.devsy_cli import DEVSY, devsy_env, raise_if_timed_out, run_devsy

__all__ = ["DEVSY", "HOST_NET", "CliResult", "DevsyCli", "cli_env"]

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
    """The real CLI with its own DEVSY_HOME and ssh config file; `env` is added to every call's environment."""

    home: Path
    ssh_config: Path
    env: dict[str, str] = field(default_factory=dict)
    created: set[str] = field(default_factory=set)

    def run(self, *args: str, input: bytes | None = None, timeout: float = 180, extra_env: dict | None = None,
            ) -> CliResult:
        """`devsy ARGS...` (stdin: `input`, else empty); fails the test with CommandTimeout past `timeout`."""
        completed: CompletedCommand = run_devsy(DEVSY, args, home=self.home, ssh_config=self.ssh_config,
                                                timeout=timeout, env={**self.env, **(extra_env or {})},
                                                input_bytes=input if input is not None else b"")
        raise_if_timed_out(completed, timeout, f"devsy {' '.join(args[:2])}")
        assert completed.exit_code is not None
        return CliResult(completed.exit_code, completed.stdout, completed.stderr)

    def up(self, source: str | Path, *args: str, ok: bool = True, **kw) -> CliResult:
        result = self.run("up", str(source), *args, "--json", **kw)
        if "--id" in args:
            self.created.add(args[args.index("--id") + 1])
        if ok:
            assert result.returncode == 0, result.text
        return result

    def wait_hooks(self, workspace_id: str, *, timeout: float = 180) -> CliResult:
        """Wait until the hooks the last `up` left to the background (those after waitFor) have ended; fails the
        test unless they all succeeded. Returns their output (`devsy logs --hooks --follow`)."""
        result = self.run("logs", workspace_id, "--hooks", "--follow", timeout=timeout)
        assert result.returncode == 0, result.text
        return result


def cli_env(devsy: DevsyCli, **extra: str) -> dict[str, str]:
    """The environment `devsy.run` uses, for tests that start the CLI with subprocess.Popen themselves."""
    return devsy_env(devsy.home, devsy.ssh_config, {**devsy.env, **extra})


def imported_modules(stderr: bytes) -> set[str]:
    """The modules a devsy run imported, from the lines PYTHONPROFILEIMPORTTIME=1 made it write on stderr."""
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", stderr.decode(), re.MULTILINE))
