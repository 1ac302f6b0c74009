"""`devsy exec`, kept apart from the other commands (as `devsy ssh` is, ssh_command.py) so that its common path imports
almost nothing: the command runs through the workspace's SSH master as an argv session (mux/protocol.py): that argv
exactly, no shell, in the workdir, with the environment a driver's exec gives it, remoteEnv included. The master runs
it through the agent, or with its own driver's exec where the agent cannot stand in for the engine (the guest has no
agent; the record's remoteUser is a bare uid: mux/driver_session.py). A command then starts in tens of milliseconds;
the driver path here (cli/commands.py) first imports the driver and its engine client (or launches an external
provider), and a Docker exec costs three API round trips.

This process runs the driver's exec itself with DEVSY_SSH_MUX=0, for a --user the agent could not take exactly as the
engine does (a bare uid, or USER:GROUP), where the guest runs an agent older than argv sessions (the master says
`direct`), and in the cases the master path leaves to the full path (no record, say), which owns their errors.
"""

from __future__ import annotations

import argparse

from devsy.errors import UsageError
from devsy.ssh.mux.protocol import agent_takes_user, mux_enabled, persist_seconds
from devsy.workspace.paths import devsy_home


def run_exec_command(args: argparse.Namespace) -> int:
    if not args.argv:
        raise UsageError("no command given", hint="pass the command after the workspace, e.g. `devsy exec WS ls -la`")
    if mux_enabled() and agent_takes_user(args.user):
        persist_seconds()  # refused here, before anything runs, rather than by a master starting in the background
        from devsy.ssh.mux import client as mux_client

        code = mux_client.run(devsy_home(), args.workspace, mux_client.Session(
            argv=args.argv, workdir=args.workdir, user=args.user, env=dict(args.env)))
        if code is not None:
            return code
    from devsy.cli.commands import exec_with_driver  # the driver and its engine client: only this path needs them

    return exec_with_driver(args)

