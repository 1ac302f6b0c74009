"""The `devsy` handle a scenario receives: runs the real CLI as a subprocess, bounded by the case deadline.

Every call runs in its own process group (killed at its timeout), with DEVSY_HOME and DEVSY_SSH_CONFIG pointing at
the run's owned directories, and is recorded (argv, exit code, output tails) for diagnostics.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.commands import CommandLog, CompletedCommand
from harness.devsy_cli import devsy_env, raise_if_timed_out, run_devsy
from harness.deadline import Deadline
from harness.outcome import Outcome, OutcomeError, parse_outcome
from harness.providers import Provider

# No single devsy command may take longer than this, even with plenty of case time left.
CALL_CAP = 240.0


@dataclass
class DevsyHandle:
    cli: list[str]
    provider: Provider
    home: Path
    ssh_config: Path
    deadline: Deadline
    log: CommandLog = field(default_factory=CommandLog)
    # Called with a workspace id just before `up` may create it, so cleanup is registered first.
    on_create: Callable[[str], None] = lambda workspace_id: None
    created: list[str] = field(default_factory=list)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return devsy_env(self.home, self.ssh_config, {**self.provider.environment(), **(extra or {})})

    def run(self, *args: str, input_bytes: bytes | None = None, cap: float = CALL_CAP,
            env: dict[str, str] | None = None) -> CompletedCommand:
        """Run `devsy ARGS...` raw (with `env` added to its environment); raises CommandTimeout if the call
        outlives its share of the deadline."""
        timeout = self.deadline.timeout(f"devsy {' '.join(args[:2])}", cap)
        completed = run_devsy(self.cli, args, home=self.home, ssh_config=self.ssh_config, timeout=timeout,
                              env={**self.provider.environment(), **(env or {})}, input_bytes=input_bytes)
        record = completed.record(note=f"env: {', '.join(sorted(env))}=..." if env else "")
        self.log.add(record)
        raise_if_timed_out(completed, timeout, record.summary())
        return completed

    def json(self, *args: str, env: dict[str, str] | None = None) -> Outcome:
        """Run `devsy ARGS... --json` and parse its single JSON outcome."""
        completed = self.run(*args, "--json", env=env)
        return parse_outcome(completed.stdout, completed.exit_code, self.log.records[-1])

    def up(
        self, source: str | Path, workspace_id: str, *, recreate: bool = False, options: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> Outcome:
        """`devsy up SOURCE --id ID` with this provider's arguments (and `env` added to devsy's environment, which
        an external provider inherits); cleanup is registered before it runs."""
        if workspace_id not in self.created:
            self.on_create(workspace_id)
            self.created.append(workspace_id)
        args = ["up", str(source), "--id", workspace_id, *self.provider.up_args()]
        for option in options:
            args += ["--provider-option", option]
        if recreate:
            args.append("--recreate")
        return self.json(*args, env=env)

    def status(self, workspace_id: str) -> Outcome:
        return self.json("status", workspace_id)

    def workspaces(self) -> Outcome:
        """`devsy list --json`; the ids are in `.listed`."""
        return self.json("list")

    def stop(self, workspace_id: str) -> Outcome:
        return self.json("stop", workspace_id)

    def start(self, workspace_id: str) -> Outcome:
        return self.json("start", workspace_id)

    def delete(self, workspace_id: str) -> Outcome:
        return self.json("delete", workspace_id)

    def exec(
        self,
        workspace_id: str,
        argv: list[str],
        *,
        user: str | None = None,
        workdir: str | None = None,
        input_bytes: bytes | None = None,
    ) -> CompletedCommand:
        """`devsy exec WS -- ARGV`: raw stdout/stderr; the exit code is the guest's."""
        # Options before WORKSPACE: everything after it may be taken as the guest argv.
        args = ["exec"]
        if user:
            args += ["--user", user]
        if workdir:
            args += ["--workdir", workdir]
        return self.run(*args, workspace_id, "--", *argv, input_bytes=input_bytes)

    def sh(self, workspace_id: str, script: str, *, user: str | None = None) -> str:
        """Run a shell script in the guest; return its stdout, failing with the output tails if it exits non-zero."""
        completed = self.exec(workspace_id, ["/bin/sh", "-c", script], user=user)
        if completed.exit_code != 0:
            record = self.log.records[-1]
            raise OutcomeError(f"guest command failed: {record.summary()}\nstderr tail:\n{record.stderr_tail}")
        return completed.stdout.decode("utf-8", "replace")

    def logs(self, workspace_id: str) -> CompletedCommand:
        return self.run("logs", workspace_id)

    def enter_command(self, workspace_id: str) -> str:
        """The exact shell command that opens a shell in this workspace's instance."""
        env = f"DEVSY_HOME={shlex.quote(str(self.home))} DEVSY_SSH_CONFIG={shlex.quote(str(self.ssh_config))}"
        cli = " ".join(shlex.quote(part) for part in self.cli)
        return f"{env} {cli} exec {shlex.quote(workspace_id)} -- /bin/sh"
