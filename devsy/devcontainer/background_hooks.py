"""The lifecycle hooks after `waitFor`, run by a devsy process of their own once `devsy up` has returned.

The spec: a tool connects once the waitFor hook (default updateContentCommand) has finished, and the later hooks go on
in the background. `devsy up` runs the hooks up to waitFor itself, then starts this module as a process in a session
of its own (Ctrl-C in the shell and a closed terminal do not reach it), hands it the later hooks over a pipe (the
environment they run with holds secrets: never argv, never a file) and returns.

Two files in the workspace's folder:
- hooks.log: the hooks' output, secrets masked as in `up`'s own output. `devsy logs WS --hooks` prints it.
- hooks.json: the process's identity (pid + start time), its hooks, the one running, those done, how it ended.
  Written by `up` before the process reads its job, then by the process, and by whoever ends it.

Every command that changes the instance (up, start, stop, delete) first ends a running continuation, under the
workspace lock: SIGTERM, which the process turns into the cancellation of its guest command (the guest tree is
killed, as for an interrupted `up`), a bounded grace, then KILL. A create hook it completes (postCreateCommand) is
marked in the record under that lock, as `up` marks it, so a continuation ended mid-hook leaves the next `up`
exactly the hooks still to run.

An interactive `devsy ssh` session is an attach too: it starts this process in attach mode (`start_attach_hooks`),
which reads the workspace itself and runs postAttachCommand the same way, so the session's start is not delayed.
It runs only when no continuation is running and no other devsy command holds the workspace (an `up` ends with its
own postAttachCommand); its output is added to hooks.log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from devsy.devcontainer.hooks import CREATE_HOOKS, run_lifecycle_command
from devsy.devcontainer.lifecycle_commands import LifecycleCommand
from devsy.errors import DevsyError
from devsy.process_tree import pin_started, start_time, stop
from devsy.progress import Progress
from devsy.redaction import redact_text, register_secrets, registered_secrets
from devsy.workspace.fsdirs import write_atomic
from devsy.workspace.paths import WorkspacePaths, workspace_paths
from devsy.workspace.record import utc_now_rfc3339

# Time for the process to cancel its guest command and exit on SIGTERM before it is KILLed.
_END_GRACE_S = 20.0
_FOLLOW_CHUNK = 65536
_FOLLOW_POLL_S = 0.2
LOG_NAME = "hooks.log"
STATE_NAME = "hooks.json"


@dataclass(frozen=True)
class DeferredHooks:
    """The hooks one `up` leaves to the background, in order, and what they run with."""

    workspace_id: str
    provider: str
    provider_options: dict[str, str]
    create_attempt: str  # the instance they belong to: a create hook is marked done only for it
    commands: tuple[LifecycleCommand, ...]
    user: str
    workdir: str
    env: dict[str, str]

    @property
    def names(self) -> list[str]:
        """The hooks that run something (a create hook with nothing to run is only marked done, in its turn)."""
        return list(dict.fromkeys(command.name for command in self.commands if command.commands))


@dataclass
class HooksState:
    """hooks.json. `state`: running, finished, failed, stopped (ended by a devsy command or a signal) or vanished (the
    process is gone without saying how: killed with SIGKILL, or the machine restarted)."""

    pid: int
    start_time: int | None
    hooks: list[str]
    state: str = "running"
    current: str = ""
    done: list[str] = field(default_factory=list)
    error: str = ""
    started_at: str = field(default_factory=utc_now_rfc3339)
    ended_at: str = ""

    def to_json(self, log: Path) -> dict[str, Any]:
        """The `background_hooks` object of `devsy status --json` and `devsy up --json`."""
        return {"state": self.state, "hooks": self.hooks, "running": self.current if self.state == "running" else "",
                "done": self.done, "error": self.error, "log": str(log)}

    def summary(self) -> str:
        if self.state == "running":
            return f"running {self.current or self.hooks[0]}"
        if self.state == "failed":
            return f"failed: {self.error.splitlines()[0] if self.error else 'see the log'}"
        return self.state


def log_path(paths: WorkspacePaths) -> Path:
    return paths.root / LOG_NAME


def _state_path(paths: WorkspacePaths) -> Path:
    return paths.root / STATE_NAME


def read_state(paths: WorkspacePaths) -> HooksState | None:
    """The last continuation's state; a `running` one whose process is gone reads as `vanished`."""
    try:
        state = HooksState(**json.loads(_state_path(paths).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None  # none yet, or unreadable: hooks.json is a report, never needed to run anything
    if state.state == "running" and start_time(state.pid) != state.start_time:
        state.state = "vanished"
    return state


def _write_state(paths: WorkspacePaths, state: HooksState) -> None:
    write_atomic(_state_path(paths), json.dumps(asdict(state)))


def start_background_hooks(paths: WorkspacePaths, deferred: DeferredHooks, progress: Progress) -> HooksState | None:
    """Start the process running `deferred`; call holding the workspace lock. None (and a warning) if it could not
    start: the `up` it ends has succeeded, so this is said, not raised."""
    log = log_path(paths)
    names = ", ".join(deferred.names)
    try:
        with log.open("wb") as out:  # the log of this up's continuation only
            proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                    cwd=paths.root)
        state = HooksState(pid=proc.pid, start_time=start_time(proc.pid), hooks=deferred.names,
                           current=deferred.names[0])
        _write_state(paths, state)  # before the job is sent: the process writes the state only after reading it
        assert proc.stdin is not None
        with proc.stdin:
            proc.stdin.write(json.dumps(_job(paths, deferred)).encode())
    except OSError as exc:
        progress.warn(f"{names} could not be started in the background ({exc.strerror or exc}); run `devsy up "
                      f"{deferred.workspace_id}` again to run them")
        return None
    progress.info(f"waitFor reached: {names} go on in the background; `devsy logs {deferred.workspace_id} --hooks "
                  f"--follow` shows them, `devsy status {deferred.workspace_id}` says how they ended")
    return state


def start_attach_hooks(paths: WorkspacePaths) -> None:
    """An interactive session began: postAttachCommand in the background (the process decides whether it runs)."""
    try:
        with log_path(paths).open("ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                    cwd=paths.root)
        assert proc.stdin is not None
        with proc.stdin:
            proc.stdin.write(json.dumps({"attach": True, "home": str(paths.root.parent.parent),
                                         "workspace_id": paths.root.name}).encode())
    except OSError:
        pass  # the session matters more than its postAttachCommand; the next one tries again


def clear_background_hooks(paths: WorkspacePaths) -> None:
    """This up left nothing to the background: no earlier continuation's state or log may describe it."""
    _state_path(paths).unlink(missing_ok=True)
    log_path(paths).unlink(missing_ok=True)


def end_background_hooks(paths: WorkspacePaths, progress: Progress) -> bool:
    """End a running continuation of this workspace; call holding the workspace lock, before touching the instance.
    True if one was running: it may have marked create hooks in the record since the caller read it."""
    state = read_state(paths)
    if state is None or state.state not in ("running", "vanished"):
        return False
    pinned = pin_started(state.pid, state.start_time) if state.state == "running" else None
    if pinned is not None:
        with pinned, progress.step(f"stopping the background hooks ({state.summary()})"):
            # The leader only: it cancels its guest command and closes its provider itself; KILL if it does not.
            stop([pinned], group=False, grace=_END_GRACE_S)
    ended = read_state(paths)
    if ended is not None and ended.state in ("running", "vanished"):
        ended.state, ended.ended_at = "stopped" if pinned is not None else "vanished", utc_now_rfc3339()
        _write_state(paths, ended)
    return True


def follow_log(paths: WorkspacePaths, out: BinaryIO, *, follow: bool) -> HooksState | None:
    """Copy hooks.log to `out` (already masked: the continuation's own output); with `follow`, until the
    continuation ends. Returns its state once copied (None: this workspace's last `up` left nothing to run)."""
    state = read_state(paths)
    if state is None:
        return None
    pinned = pin_started(state.pid, state.start_time) if follow and state.state == "running" else None
    ended = pinned is None
    try:
        with log_path(paths).open("rb") as log:
            while True:
                chunk = log.read(_FOLLOW_CHUNK)
                if chunk:
                    out.write(chunk)
                    out.flush()
                    continue
                if ended:
                    break  # the output after the exit was read by this pass
                # Not a sleep: the pidfd wakes this at the process's exit; meanwhile new output is looked for.
                ended = pinned.wait(_FOLLOW_POLL_S)  # type: ignore[union-attr]
    except FileNotFoundError:
        pass  # removed meanwhile by the next up or a delete
    finally:
        if pinned is not None:
            pinned.close()
    return read_state(paths)


def _job(paths: WorkspacePaths, deferred: DeferredHooks) -> dict[str, Any]:
    return {
        "home": str(paths.root.parent.parent), "workspace_id": deferred.workspace_id, "provider": deferred.provider,
        "provider_options": deferred.provider_options, "create_attempt": deferred.create_attempt,
        "user": deferred.user, "workdir": deferred.workdir, "env": deferred.env, "secrets": registered_secrets(),
        "hooks": [{"name": c.name, "commands": [list(pair) for pair in c.commands], "parallel": c.parallel}
                  for c in deferred.commands],
    }


def _from_job(job: dict[str, Any]) -> DeferredHooks:
    commands = tuple(LifecycleCommand(h["name"], tuple((label, list(argv)) for label, argv in h["commands"]),
                                      parallel=h["parallel"]) for h in job["hooks"])
    return DeferredHooks(job["workspace_id"], job["provider"], job["provider_options"], job["create_attempt"],
                         commands, job["user"], job["workdir"], job["env"])


def _mark_create_hook_done(paths: WorkspacePaths, create_attempt: str, name: str) -> bool:
    """Record `name` done for the instance of `create_attempt`; False if the record no longer describes it."""
    # Imported here: the lock and record modules import nothing of this one, but keep the child's start light.
    from devsy.workspace.lock import workspace_lock
    from devsy.workspace.record import load_record, save_record

    with workspace_lock(paths, command=f"devsy up {paths.root.name} (background hooks)"):
        record = load_record(paths)
        if record is None or record.create_hooks_attempt != create_attempt:
            return False
        if name not in record.create_hooks_done:
            record.create_hooks_done.append(name)
            save_record(paths, record)
    return True


def _attach_job(paths: WorkspacePaths, progress: Progress) -> tuple[DeferredHooks, HooksState] | None:
    """An interactive session's postAttachCommand, if it is to run now; its state is on disk when this returns."""
    from devsy.devcontainer.hooks import attach_hooks
    from devsy.devcontainer.features.contributions import with_recorded_features
    from devsy.devcontainer.session_env import in_instance
    from devsy.devcontainer.user_env_probe import stored_user_env, with_user_env
    from devsy.devcontainer.workspace_config import load_workspace_config
    from devsy.driver.registry import make_driver
    from devsy.errors import LockTimeout
    from devsy.workspace.lock import workspace_lock
    from devsy.workspace.record import load_record

    try:
        with workspace_lock(paths, timeout=0, command=f"devsy ssh {paths.root.name} (postAttachCommand)"):
            running = read_state(paths)
            record = load_record(paths)
            if (running is not None and running.state == "running") or record is None:
                return None  # hooks already going on (they end with postAttachCommand), or no workspace
            config = load_workspace_config(record.source, paths, record.id, record.config_path)
            config = with_recorded_features(config, record.feature_digests)
            config = in_instance(make_driver(record.provider, record.provider_options), record.id, config)
            config = with_user_env(config, stored_user_env(record, config.user_env_probe))
            commands = attach_hooks(config)
            if not commands:
                return None
            deferred = DeferredHooks(record.id, record.provider, dict(record.provider_options),
                                     record.create_hooks_attempt, tuple(commands), record.remote_user,
                                     config.workspace_folder, dict(config.remote_env))
            state = HooksState(pid=os.getpid(), start_time=start_time(os.getpid()), hooks=deferred.names)
            _write_state(paths, state)
    except LockTimeout:
        return None  # another devsy command changes the workspace now; an up runs postAttachCommand itself
    progress.info(f"an interactive session attached: running {', '.join(deferred.names)}")
    return deferred, state


def _run(job: dict[str, Any]) -> int:
    from devsy.driver.registry import make_driver

    progress = Progress(sys.stderr)
    if job.get("attach"):
        paths = workspace_paths(Path(job["home"]), job["workspace_id"])
        try:
            attached = _attach_job(paths, progress)
        except DevsyError as exc:
            progress.info(f"postAttachCommand of the interactive session not run: {redact_text(exc.message)}")
            return 1
        if attached is None:
            return 0
        deferred, state = attached
    else:
        register_secrets(job["secrets"])
        deferred = _from_job(job)
        paths = workspace_paths(Path(job["home"]), deferred.workspace_id)
        state = read_state(paths) or HooksState(pid=os.getpid(), start_time=start_time(os.getpid()),
                                                hooks=deferred.names)
    code = 0
    try:
        driver = make_driver(deferred.provider, deferred.provider_options)
        for index, command in enumerate(deferred.commands):
            if command.commands:
                state.current = command.name
                _write_state(paths, state)
            run_lifecycle_command(driver, deferred.workspace_id, command, user=deferred.user,
                                  workdir=deferred.workdir, env=deferred.env, progress=progress)
            following = deferred.commands[index + 1:index + 2]
            last_of_hook = not following or following[0].name != command.name  # its Features' ran before it
            if command.name in CREATE_HOOKS and last_of_hook and not _mark_create_hook_done(
                    paths, deferred.create_attempt, command.name):
                raise _Replaced()
            if command.commands:
                state.done.append(command.name)
        state.state = "finished"
    except _Replaced:
        state.state = "stopped"
        state.error = "the instance these hooks were for was replaced"
    except DevsyError as exc:
        state.state, state.error, code = "failed", redact_text(exc.message), 1
        progress.info(f"{state.current} failed: {state.error}")
    except KeyboardInterrupt as interrupt:  # Terminated too: a devsy command is ending this process
        state.state, code = "stopped", 128 + getattr(interrupt, "signum", 2)
    state.current = state.current if state.state != "finished" else ""
    state.ended_at = utc_now_rfc3339()
    _write_state(paths, state)
    return code


class _Replaced(Exception):
    pass


def main() -> int:
    from devsy.termination import raise_on_termination

    raise_on_termination(keep_ignored=False)  # SIGTERM is how devsy ends this process, whatever it inherited
    return _run(json.loads(sys.stdin.buffer.read()))


if __name__ == "__main__":
    sys.exit(main())
