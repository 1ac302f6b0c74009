"""One small function per command: turn parsed arguments into one call below, and its result into output."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

from devsy.cli.outcome import emit_error, emit_success, workspace_json
from devsy.agent.note import read_note
from devsy.workspace import operations
from devsy.driver.base import CancelToken, ExecRequest
from devsy import termination
from devsy.errors import Cancelled, DevsyError, UsageError
from devsy.exit_status import shell_status
from devsy.progress import Progress
from devsy.reader_gone import READER_GONE_EXIT, WatchedOutput
from devsy.redaction import RedactingWriter, configured_secrets, redact_error
from devsy.workspace.paths import devsy_home, ssh_config_path, workspace_paths

if TYPE_CHECKING:
    from devsy.devcontainer.background_hooks import HooksState


def dispatch(args: argparse.Namespace) -> int:
    handler = _HANDLERS[args.command]
    return handler(args)


def _content_dir(home: Path, record) -> str | None:
    return None if record.source_kind == "local" else str(workspace_paths(home, record.id).content)


def _up(args: argparse.Namespace) -> int:
    # Imported here: image building and cloning are only needed by `up`, and every other command starts faster.
    from devsy.devcontainer.runner import UpRequest, up

    home = devsy_home()
    request = UpRequest(
        source=args.source, cwd=Path.cwd(), home=home, ssh_config=args.ssh_config or ssh_config_path(),
        workspace_id=args.workspace_id, provider=args.provider, provider_options=dict(args.provider_option),
        recreate=args.recreate, config=args.config, wait_all_hooks=args.wait_all_hooks,
    )
    progress = Progress()
    try:
        result = up(request, progress)
    except DevsyError as exc:
        if not progress.warnings:
            raise
        # The warnings were printed already; the --json error outcome carries them as a success would.
        return emit_error("up", args.json, redact_error(exc), warnings=progress.warnings)
    record = result.record
    payload = {"workspace": workspace_json(record, result.instance, _content_dir(home, record), reused=result.reused,
                                           background_hooks=_hooks_json(home, record.id, result.background_hooks),
                                           ssh_path=_ssh_path(home, record.id)),
               "warnings": progress.warnings}
    human = f"workspace {record.id} is {result.instance.status.value}; enter it with `ssh {record.id}.devsy`"
    return emit_success("up", args.json, payload, human)


def _hooks_json(home: Path, workspace_id: str, state: HooksState | None) -> dict | None:
    from devsy.devcontainer.background_hooks import log_path  # not for `devsy exec` (see operations.py)

    return None if state is None else state.to_json(log_path(workspace_paths(home, workspace_id)))


def _ssh_path(home: Path, workspace_id: str) -> str | None:
    """How the workspace's SSH sessions are served: "agent" (in the guest), "exec" (from the host, one driver exec
    each: the guest cannot run the agent), or None before anything has found out (no `up` has finished)."""
    note = read_note(workspace_paths(home, workspace_id))
    return None if note is None else note.sessions.value


def _ssh_line(home: Path, workspace_id: str) -> str:
    note = read_note(workspace_paths(home, workspace_id))
    if note is None:
        return ""
    if note.exec_sessions:
        terminal = (f"terminals through {note.terminal}" if note.terminal
                    else "no terminal (the image has neither `script` nor busybox telnetd)")
        return f"\nssh: exec sessions from the host, {terminal} (the guest cannot run devsy's agent: {note.why})"
    return f"\nssh: devsy's agent in the guest{f' (Python {note.python})' if note.python else ''}"


def _state(args: argparse.Namespace, state: operations.WorkspaceState) -> int:
    home = devsy_home()
    hooks = _hooks_json(home, state.record.id, state.background_hooks)
    payload = {"workspace": workspace_json(state.record, state.instance, _content_dir(home, state.record),
                                           background_hooks=hooks, ssh_path=_ssh_path(home, state.record.id))}
    human = f"workspace {state.record.id} is {state.status}" + _ssh_line(home, state.record.id)
    if state.background_hooks is not None:
        human += (f"\nbackground hooks ({', '.join(state.background_hooks.hooks)}): "
                  f"{state.background_hooks.summary()}; output: `devsy logs {state.record.id} --hooks`")
    return emit_success(args.command, args.json, payload, human)


def _status(args: argparse.Namespace) -> int:
    return _state(args, operations.status(devsy_home(), args.workspace))


def _start(args: argparse.Namespace) -> int:
    return _state(args, operations.start(devsy_home(), args.workspace, Progress()))


def _stop(args: argparse.Namespace) -> int:
    return _state(args, operations.stop(devsy_home(), args.workspace, Progress()))


def _delete(args: argparse.Namespace) -> int:
    workspace_id = operations.delete(devsy_home(), args.workspace, Progress())
    return emit_success("delete", args.json, {"workspace_id": workspace_id}, f"workspace {workspace_id} deleted")


def _list(args: argparse.Namespace) -> int:
    records = operations.list_workspaces(devsy_home())
    payload = {"workspaces": [{"id": r.id, "provider": r.provider, "source_kind": r.source_kind} for r in records]}
    human = "\n".join(f"{r.id}\t{r.provider}\t{r.source_kind}" for r in records) or "no workspaces"
    return emit_success("list", args.json, payload, human)


_CANCEL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def cancellable(run: Callable[[CancelToken], int]) -> int:
    """Run with SIGINT/SIGTERM/SIGHUP wired to a cancel token; a command ended by one of them exits 128+signal.

    SIGHUP is what a closed terminal sends: its default action would end devsy at once, leaving the guest command
    running in the workspace. A signal inherited as ignored (`nohup devsy exec ...`) stays ignored
    (termination.py)."""
    cancel = CancelToken()
    received: list[int] = []
    try:
        with termination.cancelling(_CANCEL_SIGNALS, cancel.cancel) as received:
            code = run(cancel)
    except Cancelled:
        if not received:
            raise
        code = 0
    return 128 + received[0] if received else code


def exec_with_driver(args: argparse.Namespace) -> int:
    """`devsy exec` through the workspace's driver (cli/exec_command.py says when; it has checked the argv)."""
    argv = args.argv

    # The guest's bytes go through unaltered: redaction is for what devsy itself prints, never for session output
    # (masking an --env value would corrupt any output that happens to contain it, `true` or a binary alike).
    def run(cancel: CancelToken) -> int:
        stdout, stderr = WatchedOutput(sys.stdout.buffer), WatchedOutput(sys.stderr.buffer)
        stdin = sys.stdin.buffer if sys.stdin is not None else None  # None: started with stdin closed (`<&-`)
        request = ExecRequest(argv=argv, stdin=stdin, stdout=cast(BinaryIO, stdout),
                              stderr=cast(BinaryIO, stderr), user=args.user, workdir=args.workdir, env=dict(args.env),
                              cancel=cancel)
        result = operations.exec_command(devsy_home(), args.workspace, request)
        # The driver ended the command as cancelled when its output had no reader: a shell's 141, not a Ctrl-C's 130.
        return READER_GONE_EXIT if stdout.reader_gone or stderr.reader_gone else shell_status(result)

    return cancellable(run)


@contextlib.contextmanager
def _redacted_output() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """stdout/stderr through the redaction filter when DEVSY_REDACT configures secrets (devsy printing stored logs)."""
    secrets = configured_secrets()
    if not secrets:
        yield sys.stdout.buffer, sys.stderr.buffer
        return
    stdout, stderr = RedactingWriter(sys.stdout.buffer, secrets), RedactingWriter(sys.stderr.buffer, secrets)
    try:
        yield stdout, stderr  # type: ignore[misc]
    finally:
        stdout.close()
        stderr.close()


def _logs(args: argparse.Namespace) -> int:
    if args.follow and not args.hooks:
        raise UsageError("--follow is for --hooks", hint="run `devsy logs WS --hooks --follow`")
    with _redacted_output() as (stdout, _):
        if not args.hooks:
            operations.logs(devsy_home(), args.workspace, stdout)
            return 0
        state = operations.hooks_log(devsy_home(), args.workspace, stdout, follow=args.follow)
    if state is None:
        print(f"devsy: workspace {args.workspace}'s last `devsy up` left no hooks to the background",
              file=sys.stderr)
        return 0
    if state.state in ("running", "finished"):
        return 0
    print(f"devsy: the background hooks {state.summary()}", file=sys.stderr)
    return 1 if state.state == "failed" else 2


_HANDLERS = {
    "up": _up, "status": _status, "start": _start, "stop": _stop, "delete": _delete, "list": _list,
    "logs": _logs,
}  # `exec` and `ssh` start in cli/exec_command.py and cli/ssh_command.py, which import almost nothing
