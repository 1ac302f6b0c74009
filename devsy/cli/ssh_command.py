"""`devsy ssh`, kept apart from the other commands so that its common path imports almost nothing: a session goes
through the workspace's SSH master (devsy/ssh/mux/client.py), which adds the workspace's remoteEnv; --stdio,
DEVSY_SSH_MUX=0 and the cases that path leaves alone (an unreadable record, say) take the full path
(devsy/ssh/command.py)."""

from __future__ import annotations

import argparse

from devsy.ssh.mux.protocol import mux_enabled, persist_seconds
from devsy.workspace.paths import devsy_home, workspace_paths


def run_ssh_command(args: argparse.Namespace) -> int:
    if not args.stdio and args.remote_command is None:
        _attach(args.workspace)
    use_master = mux_enabled()
    persist_seconds()  # refused here, before anything runs, rather than by a master starting in the background
    if not args.stdio and use_master:
        from devsy.ssh.mux import client as mux_client

        # The master adds the workspace's remoteEnv: parsing devcontainer.json is most of what this process would
        # otherwise import, and the master has it loaded.
        code = mux_client.run(devsy_home(), args.workspace, mux_client.Session(
            command=args.remote_command, user=args.user, env=dict(args.env), tty=args.tty))
        if code is not None:
            return code
    env = dict(args.env) if args.stdio else _session_env(args.workspace, dict(args.env), args.user)
    # Imported here: only this path needs paramiko and the driver in this process.
    from devsy.cli.commands import cancellable
    from devsy.ssh.command import SshOptions, run_ssh

    options = SshOptions(workspace=args.workspace, command=args.remote_command, user=args.user, env=env,
                         stdio=args.stdio, tty=args.tty)
    return cancellable(lambda cancel: run_ssh(devsy_home(), options, cancel))


def _attach(workspace: str) -> None:
    """An interactive session is an attach: postAttachCommand runs in the background, never delaying the shell."""
    from devsy.devcontainer.background_hooks import start_attach_hooks
    from devsy.workspace.ids import validate_workspace_id

    paths = workspace_paths(devsy_home(), validate_workspace_id(workspace))
    if paths.record.is_file():
        start_attach_hooks(paths)


def _session_env(workspace: str, explicit: dict[str, str], user: str) -> dict[str, str]:
    """The session's env requests: the config's remoteEnv (re-read now, devsy stores none of it) under --env."""
    from devsy.devcontainer.session_env import ssh_env, workspace_session_env
    from devsy.driver.registry import make_driver
    from devsy.workspace.ids import validate_workspace_id
    from devsy.workspace.record import load_record

    paths = workspace_paths(devsy_home(), validate_workspace_id(workspace))
    record = load_record(paths)
    if record is None:
        return explicit  # the session path says the workspace does not exist
    remote = workspace_session_env(record, paths, lambda: make_driver(record.provider, record.provider_options),
                                   user)
    return ssh_env(remote, explicit)
