"""`devsy` command line: argument parsing only; each command calls one function of the layers below."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import devsy.no_docker_ssh_transport  # noqa: F401  (first: before anything imports docker)
from devsy.errors import Cancelled, DevsyError
from devsy.process_exit import skip_final_collection
from devsy.redaction import redact_error
from devsy.stack_dump import dump_stacks_on_signal
from devsy.termination import Terminated, raise_on_termination

_DESCRIPTION = """\
devsy brings up a devcontainer (devcontainer.json) as a container or microVM and gives you commands to work in it.
State lives in $DEVSY_HOME (default ~/.devsy); `devsy up` writes an OpenSSH entry `<id>.devsy` into
$DEVSY_SSH_CONFIG (default ~/.ssh/config)."""


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        # Only the key is echoed: the value may be a secret.
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {key or 'an empty key'!r} without '='")
    return key, value


def _guest_directory(text: str) -> str:
    # The engine refuses a relative working directory and the agent would resolve it against its own: refused here,
    # the same way for every path `devsy exec` may take.
    if text and not text.startswith("/"):  # "" is the default: the workspace folder
        raise argparse.ArgumentTypeError(f"{text!r} is not an absolute path in the workspace (e.g. /tmp, or the "
                                         "workspace folder's path)")
    return text


def _provider_help(argv: list[str] | None) -> str:
    # The table is read only when `up`'s help can be shown: `devsy ssh` and `exec` must not import the driver layer.
    if argv is not None and "up" not in argv:
        return "backend provider (`devsy up --help` lists them)"
    from devsy.driver.provider_table import help_text

    return help_text()


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; `argv` (the command line to parse) lets it skip what that command line cannot show."""
    parser = argparse.ArgumentParser(prog="devsy", description=_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, help="devsy state directory (default: $DEVSY_HOME or ~/.devsy)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_text: str, *, json_flag: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if json_flag:
            p.add_argument("--json", action="store_true",
                           help='print one JSON outcome object on stdout ({"outcome": "success"|"error", ...})')
        return p

    up = command("up", "Create, start or reuse the workspace of SOURCE (a folder with devcontainer.json, "
                       "git:URL, or an image reference).")
    up.add_argument("source", metavar="SOURCE")
    up.add_argument("--id", dest="workspace_id", help="workspace id (1-63 of a-z, 0-9, '-'; default: from SOURCE)")
    up.add_argument("--provider", help=_provider_help(argv))
    up.add_argument("--provider-option", action="append", type=_key_value, default=[], metavar="KEY=VALUE",
                    help="provider option, repeatable; docker: NETWORK_MODE=default|host|none|bridge, STOP_TIMEOUT=S; "
                         "external:EXECUTABLE: ARGS='ARG ...' its arguments, exactly (shell-style quoting; default "
                         "none), any other KEY=VALUE its environment")
    up.add_argument("--config", default="", metavar="FILE",
                    help="the devcontainer.json to use, relative to SOURCE or absolute (needed when SOURCE has "
                         "several, e.g. .devcontainer/<name>/devcontainer.json); later commands reuse it")
    up.add_argument("--recreate", action="store_true",
                    help="replace the instance (instance-local data is lost; workspace content is kept)")
    up.add_argument("--wait-all-hooks", action="store_true",
                    help="run the lifecycle hooks after waitFor (default updateContentCommand) before returning, as "
                         "the reference CLI's up does; without it they go on in the background once up has "
                         "returned (`devsy logs WS --hooks` shows them)")
    up.add_argument("--ssh-config", type=Path,
                    help="ssh config file for the workspace's Host entry (default: $DEVSY_SSH_CONFIG or ~/.ssh/config)")

    for name, text in (("status", "Show the workspace and its instance state."),
                       ("start", "Start a stopped workspace (runs postStartCommand)."),
                       ("stop", "Stop the workspace's instance; its data is kept."),
                       ("delete", "Delete the instance, its volumes, SSH entry, managed content and record. "
                                  "A local source folder is never touched.")):
        command(name, text).add_argument("workspace", metavar="WORKSPACE")
    command("list", "List workspaces.")

    ex = command("exec", "Run ARGV in the workspace; stdout/stderr are passed through byte for byte and the "
                         "exit code is the command's.", json_flag=False)
    ex.epilog = ("SIGINT/SIGTERM/SIGHUP stop the command's processes in the workspace and exit 128+N; they never "
                 "outlive devsy, however it ends (killed, or its output pipe closed).")
    ex.add_argument("workspace", metavar="WORKSPACE")
    ex.add_argument("--user", "-u", default="", help="user to run as (default: the workspace's remote user)")
    ex.add_argument("--workdir", "-w", default="", type=_guest_directory,
                    help="absolute working directory in the workspace (default: the workspace folder)")
    ex.add_argument("--env", "-e", action="append", type=_key_value, default=[], metavar="KEY=VALUE",
                    help="environment variable, repeatable")
    ex.add_argument("argv", nargs="*", metavar="ARGV",
                    help="the command and its arguments; devsy's options go before it (`--` also ends them)")

    logs = command("logs", "Print what the workspace's workload wrote (running or stopped).", json_flag=False)
    logs.add_argument("workspace", metavar="WORKSPACE")
    logs.add_argument("--hooks", action="store_true",
                      help="print instead the output of the lifecycle hooks the last `devsy up` left to the "
                           "background (those after waitFor), kept in $DEVSY_HOME/workspaces/WS/hooks.log")
    logs.add_argument("--follow", "-f", action="store_true",
                      help="with --hooks: go on until those hooks end; the exit code is 0 if they all succeeded, 1 "
                           "if one failed, 2 if they were stopped or vanished")

    ssh = command("ssh", "Open a shell in the workspace (or run --command) over SSH through the in-guest agent; "
                         "stdout/stderr bytes pass through untouched and the exit code is the command's "
                         "(128+N when it died of signal N).", json_flag=False)
    ssh.epilog = ("Sessions run through the workspace's SSH master (started by the first `devsy ssh`, like OpenSSH's "
                  "ControlMaster), so later ones start in tens of milliseconds. It exits after DEVSY_SSH_PERSIST_S "
                  "idle seconds (default 600) and on stop/delete; DEVSY_SSH_MUX=0 connects without it. "
                  "SIGINT/SIGTERM/SIGHUP stop the command's processes in the workspace and exit 128+N.")
    ssh.add_argument("workspace", metavar="WORKSPACE")
    ssh.add_argument("--command", "-c", dest="remote_command", metavar="COMMAND",
                     help="run this command with the user's shell instead of an interactive shell")
    ssh.add_argument("--user", "-u", default="", help="user to run as (default: the workspace's remote user)")
    ssh.add_argument("--env", "-e", action="append", type=_key_value, default=[], metavar="KEY=VALUE",
                     help="environment variable for the session, repeatable")
    ssh.add_argument("--tty", "-t", action="store_true",
                     help="allocate a terminal for --command too (when stdin is a terminal)")
    ssh.add_argument("--stdio", action="store_true",
                     help="relay the raw SSH stream on stdin/stdout (OpenSSH's ProxyCommand uses this)")
    return parser


# The options that take a value, for finding where the guest command starts (tests/test_cli_parsing.py checks
# these against the parser).
GLOBAL_VALUE_OPTIONS = ("--home",)
EXEC_VALUE_OPTIONS = ("--user", "-u", "--workdir", "-w", "--env", "-e")


def _split_guest_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split `devsy [opts] exec [opts] WS [opts] [--] CMD...` where the guest command starts: at the first argument
    after WS that is neither a devsy option nor its value, or after `--`. So the command's own options are never
    taken for devsy's: `devsy exec WS id -u` runs `id -u`, and `devsy exec WS -u dev -- id -u` runs it as dev."""
    i = _skip_options(argv, 0, GLOBAL_VALUE_OPTIONS)
    if i >= len(argv) or argv[i] != "exec":
        return argv, []
    i = _skip_options(argv, i + 1, EXEC_VALUE_OPTIONS)  # at WORKSPACE
    if i >= len(argv) or argv[i] == "--":
        return argv, []  # no workspace: argparse says so
    i = _skip_options(argv, i + 1, EXEC_VALUE_OPTIONS)  # at the command, or at `--`
    if i < len(argv) and argv[i] == "--":
        return argv[:i], argv[i + 1:]
    return argv[:i], argv[i:]


def _skip_options(argv: list[str], i: int, value_options: tuple[str, ...]) -> int:
    """The index of the first argument from `i` on that is not an option or an option's value (or is `--`)."""
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-", "--"):
        i += 2 if argv[i] in value_options else 1
    return i


def _dispatch(args: argparse.Namespace) -> int:
    # Imported per command: `devsy ssh` and `exec` run often and must not pay for the driver, docker or paramiko
    # imports.
    if args.command == "ssh":
        from devsy.cli.ssh_command import run_ssh_command

        return run_ssh_command(args)
    if args.command == "exec":
        from devsy.cli.exec_command import run_exec_command

        return run_exec_command(args)
    from devsy.cli import commands

    return commands.dispatch(args)


# Commands whose sessions handle every signal themselves (`exec` in commands.cancellable, `ssh` in its client).
_OWN_SIGNALS = ("exec", "ssh")


def main(argv: list[str] | None = None) -> int:
    head, guest_command = _split_guest_command(list(sys.argv[1:] if argv is None else argv))
    args = build_parser(head).parse_args(head)
    if args.command == "exec":
        args.argv = [*args.argv, *guest_command]
    if args.home is not None:
        os.environ["DEVSY_HOME"] = str(args.home)  # one source of truth for this process and its helpers
    as_json = getattr(args, "json", False)
    dump_stacks_on_signal()
    if args.command not in _OWN_SIGNALS:
        raise_on_termination()  # `up` then stops the host commands it started and removes what it had created
    try:
        return _dispatch(args)
    except DevsyError as exc:
        from devsy.cli.outcome import emit_error

        return emit_error(args.command, as_json, redact_error(exc))
    except KeyboardInterrupt as interrupt:
        from devsy.cli.outcome import emit_error

        cancelled = Cancelled("interrupted", hint="rerun the command; anything it had created was removed")
        if isinstance(interrupt, Terminated):  # the shell's convention: 128+N for signal N (Ctrl-C's is 130)
            cancelled.message = f"interrupted by {signal.Signals(interrupt.signum).name}"
            cancelled.exit_code = 128 + interrupt.signum
        return emit_error(args.command, as_json, cancelled)
    finally:
        skip_final_collection()  # main is the process's entry: sys.exit(main()) ends it


if __name__ == "__main__":
    sys.exit(main())
