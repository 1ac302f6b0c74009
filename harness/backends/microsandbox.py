"""MicroSandbox as the harness sees it: sandboxes and volumes through the real `msb` CLI (not devsy's driver).

Sandboxes carry devsy's labels (`dev.devsy.workspace`, ...), read with `msb inspect NAME --format json`. msb volumes
carry no labels, so a volume belongs to a workspace when that workspace's sandbox lists it as created
(`dev.devsy.created-volumes`) or when its name starts with `<workspace id>-`: every volume a scenario asks for is
named after its workspace id, which is also how a volume left by a failed `up` (no sandbox any more) is still found.
Every command is bounded and runs in its own process group; msb's state directory is the one devsy uses (MSB_HOME).

A simulated column (`*-microsandbox-sim`) is inspected the same way, through the stand-in devsy-msb-sim with the
column's own environment (MSB_PATH at the stand-in, the run's MSB_HOME): SimulatedMicrosandboxInspector.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import psutil

from harness.backends import (
    LABEL_WORKSPACE,
    BackendExec,
    BackendInstance,
    BackendUnavailable,
    LabelMatch,
    SweepOutcome,
)
from harness.commands import CompletedCommand, run_bounded, tail

MSB_TIMEOUT = 60.0
SANDBOX_PREFIX = "devsy-"
LABEL_CREATED_VOLUMES = "dev.devsy.created-volumes"


@dataclass(frozen=True)
class Sandbox:
    name: str
    status: str
    created_at: str
    labels: dict[str, str]

    @property
    def workspace(self) -> str:
        return self.labels.get(LABEL_WORKSPACE, "")

    @property
    def created_volumes(self) -> list[str]:
        return [v for v in self.labels.get(LABEL_CREATED_VOLUMES, "").split(",") if v]


class MsbFailed(BackendUnavailable):
    """An msb command the inspector ran failed (or printed no JSON) for a reason other than "not found"."""


class MicrosandboxInspector:
    """msb as devsy finds it (MSB_PATH, the bundled binary, PATH), in this process's environment, or in `env` added
    to it (a simulated column's MSB_PATH and MSB_HOME)."""

    backend = "microsandbox"

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.added_env = dict(env or {})

    @property
    def env(self) -> dict[str, str] | None:
        """The environment every msb command here runs with (None: this process's own)."""
        return {**os.environ, **self.added_env} if self.added_env else None

    @cached_property
    def msb(self) -> str:
        from devsy.driver.microsandbox.locate import MSB_PATH_ENV, locate_msb  # the binary devsy itself would run
        from devsy.errors import DevsyError

        if MSB_PATH_ENV in self.added_env:  # the column names its msb (a stand-in): exactly that one
            return self.added_env[MSB_PATH_ENV]
        try:
            return locate_msb().path
        except DevsyError as exc:
            raise BackendUnavailable(f"msb is not usable: {exc}") from exc

    def run_msb(self, *args: str, timeout: float = MSB_TIMEOUT) -> CompletedCommand:
        """`msb ARGS...` bounded, in this inspector's environment (for scenarios that read msb directly)."""
        return run_bounded([self.msb, *args], timeout=timeout, env=self.env)

    def _run(self, *args: str) -> CompletedCommand:
        completed = self.run_msb(*args)
        if completed.timed_out:
            raise MsbFailed(f"`msb {' '.join(args)}` did not finish within {MSB_TIMEOUT:g}s (process group killed); "
                            f"{creation_lock_holders()}; its stderr: {tail(completed.stderr, 5) or '(none)'}")
        return completed

    def _json(self, *args: str) -> Any:
        completed = self._run(*args, "--format", "json")
        if completed.exit_code != 0:
            raise MsbFailed(f"`msb {' '.join(args)}` exited {completed.exit_code}: {tail(completed.stderr, 5)}")
        return _parse(completed, f"msb {' '.join(args)}")

    # -- reading -------------------------------------------------------------------------------------------------
    def _inspect(self, name: str) -> Sandbox | None:
        completed = self._run("inspect", name, "--format", "json")
        if completed.exit_code != 0:
            if f"sandbox not found: {name}" in completed.stderr.decode("utf-8", "replace"):
                return None  # removed between `ls` and `inspect`
            raise MsbFailed(f"`msb inspect {name}` exited {completed.exit_code}: {tail(completed.stderr, 5)}")
        data = _parse(completed, f"msb inspect {name}")
        config = data.get("active_config") or data.get("config") or {}
        labels = {str(k): str(v) for k, v in (config.get("labels") or {}).items()}
        return Sandbox(str(data.get("name", name)), str(data.get("status", "")), str(data.get("created_at", "")),
                       labels)

    def _names(self, *label_filter: str) -> list[str]:
        """The devsy sandboxes `msb ls` lists with every label of `label_filter` (msb filters by label itself)."""
        args = [arg for label in label_filter for arg in ("--label", label)]
        names = [str(entry.get("name", "")) for entry in self._json("ls", *args)]
        return sorted(name for name in names if name.startswith(SANDBOX_PREFIX))

    def _sandboxes(self, *label_filter: str) -> list[Sandbox]:
        return [sandbox for name in self._names(*label_filter) if (sandbox := self._inspect(name)) is not None]

    def _volume_names(self) -> list[str]:
        return sorted(str(entry.get("name", "")) for entry in self._json("volume", "ls"))

    def instances(self, workspace_id: str) -> list[BackendInstance]:
        """Every sandbox labelled with this workspace id (devsy should keep at most one)."""
        return [_instance(s) for s in self._sandboxes(f"{LABEL_WORKSPACE}={workspace_id}")]

    def volumes(self, workspace_id: str) -> list[str]:
        """Volumes the workspace's sandbox created, and volumes named `<workspace id>-...`."""
        created = {v for s in self._sandboxes(f"{LABEL_WORKSPACE}={workspace_id}") for v in s.created_volumes}
        return [name for name in self._volume_names() if name in created or name.startswith(f"{workspace_id}-")]

    def instance_logs(self, workspace_id: str, lines: int = 200) -> str:
        parts = []
        for sandbox in self._sandboxes(f"{LABEL_WORKSPACE}={workspace_id}"):
            completed = self._run("logs", sandbox.name, "--source", "all", "--no-color", "--tail", str(lines))
            text = (completed.stdout + completed.stderr).decode("utf-8", "replace")
            parts.append(f"--- msb logs {sandbox.name} --source all (last {lines} lines; status {sandbox.status}) "
                         f"---\n{text}")
        return "\n".join(parts) or f"(no sandbox labelled {LABEL_WORKSPACE}={workspace_id})"

    def exec(self, workspace_id: str, argv: list[str]) -> BackendExec:
        """`msb exec` in the workspace's one sandbox, without --user: the runtime's default execution identity."""
        # Names only: an exec needs no labels or status, and each msb command is a process (a stand-in's costs ~0.1 s).
        names = self._names(f"{LABEL_WORKSPACE}={workspace_id}")
        if len(names) != 1:
            raise MsbFailed(f"expected one sandbox labelled {LABEL_WORKSPACE}={workspace_id}, msb has {names}")
        completed = self._run("exec", names[0], "--stream", "--", *argv)
        return BackendExec(completed.exit_code, completed.stdout.decode("utf-8", "replace"),
                           completed.stderr.decode("utf-8", "replace"))

    # -- removing ------------------------------------------------------------------------------------------------
    def remove_workspace(self, workspace_id: str) -> list[str]:
        """Force-remove the workspace's sandboxes, then its volumes; already-gone objects are fine."""
        volumes = self.volumes(workspace_id)
        removed = []
        for sandbox in self._sandboxes(f"{LABEL_WORKSPACE}={workspace_id}"):
            self._remove_sandbox(sandbox.name)
            removed.append(f"sandbox {sandbox.name}")
        for name in volumes:
            self._remove_volume(name)
            removed.append(f"volume {name}")
        return removed

    def sweep(self, owned: LabelMatch, keep: LabelMatch) -> SweepOutcome:
        """Remove every devsy sandbox, then every volume, whose labels `owned` accepts and `keep` does not.

        A volume's labels are its workspace's: the sandbox that created it, else the workspace whose id prefixes
        its name, else (an orphan) its own name, which is owned when it starts with a run's workspace prefix."""
        outcome = SweepOutcome()
        sandboxes = self._sandboxes()
        workspaces = sorted({s.workspace for s in sandboxes if s.workspace}, key=len, reverse=True)
        creator = {v: s.workspace for s in sandboxes for v in s.created_volumes}
        for sandbox in sandboxes:
            if owned(sandbox.labels) and not keep(sandbox.labels):
                _record(outcome, f"sandbox {sandbox.name}", lambda n=sandbox.name: self._remove_sandbox(n))
        for name in self._volume_names():
            workspace = creator.get(name) or next((w for w in workspaces if name.startswith(f"{w}-")), name)
            labels = {LABEL_WORKSPACE: workspace}
            if owned(labels) and not keep(labels):
                _record(outcome, f"volume {name}", lambda n=name: self._remove_volume(n))
        return outcome

    def _remove_sandbox(self, name: str) -> None:
        completed = self._run("rm", "--force", name)
        if completed.exit_code != 0 and f"sandbox not found: {name}" not in completed.stderr.decode("utf-8", "replace"):
            raise MsbFailed(f"`msb rm --force {name}` exited {completed.exit_code}: {tail(completed.stderr, 5)}")

    def _remove_volume(self, name: str) -> None:
        completed = self._run("volume", "rm", name)
        if completed.exit_code != 0 and "volume not found" not in completed.stderr.decode("utf-8", "replace"):
            raise MsbFailed(f"`msb volume rm {name}` exited {completed.exit_code}: {tail(completed.stderr, 5)}")


class SimulatedMicrosandboxInspector(MicrosandboxInspector):
    """A simulated column's view: the stand-in devsy-msb-sim, called exactly as msb, with the column's MSB_PATH and
    MSB_HOME (never this process's msb)."""

    backend = "microsandbox-sim"

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        from devsy.driver.microsandbox.locate import MSB_PATH_ENV

        if not env or MSB_PATH_ENV not in env or "MSB_HOME" not in env:
            raise BackendUnavailable("a simulated MicroSandbox column is inspected with its own MSB_PATH and "
                                     "MSB_HOME (harness/providers.py SIMULATORS); none were given")
        super().__init__(env)


def creation_lock_holders() -> str:
    """Which processes have a file under an msb home's run/creation-locks open: msb 0.7.11's `inspect` waits for as
    long as its sandbox's lock is held (`ls` does not), so a hung `inspect` is explained by a holder named here. Only
    a holder's program and first argument are named: the rest of a command line may carry env values."""
    holders = set()
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if "/run/creation-locks/" in target:
            pid = fd.split("/")[2]
            try:
                argv = psutil.Process(int(pid)).cmdline() or ["?"]
                command = " ".join([os.path.basename(argv[0]), *argv[1:2]])
            except psutil.Error:
                command = "?"  # it ended meanwhile
            holders.add(f"pid {pid} ({command}) has {target} open")
    return "creation locks open in: " + "; ".join(sorted(holders)) if holders else "no creation lock was open"


def _instance(sandbox: Sandbox) -> BackendInstance:
    # Only a Running VM is "running" (as devsy's driver reports it); every other msb status is shown lowercased.
    # msb has no instance id: an instance is its name plus its creation time (`name@created_at`), which changes
    # when a sandbox of the same name replaces it (the form devsy reports too).
    instance_id = f"{sandbox.name}@{sandbox.created_at}" if sandbox.created_at else sandbox.name
    return BackendInstance(id=instance_id, name=sandbox.name, created_at=sandbox.created_at,
                           status=sandbox.status.lower(), labels=dict(sandbox.labels))


def _parse(completed: CompletedCommand, what: str) -> Any:
    try:
        return json.loads(completed.stdout)
    except ValueError as exc:
        raise MsbFailed(f"`{what} --format json` printed no JSON ({exc}): {tail(completed.stdout, 3)}") from exc


def _record(outcome: SweepOutcome, what: str, action: Callable[[], None]) -> None:
    try:
        action()
        outcome.removed.append(what)
    except (MsbFailed, OSError) as exc:
        outcome.errors.append(f"{what}: {exc}")
