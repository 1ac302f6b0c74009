"""`devsy-agent` commands: `ssh-server --stdio` (the SSH server), `setup` (prepare once, report), `version`; on a
remote machine: `runtime-serve` (a workspace's runtime, relayed over stdio) and `workspace-remove`."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="devsy-agent", description="devsy's in-guest agent")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    ssh = sub.add_parser("ssh-server", help="serve one SSH connection")
    ssh.add_argument("--stdio", action="store_true", required=True, help="on stdin/stdout (the only transport)")
    ssh.add_argument("--workdir", default="", help="where sessions start (default: the user's home)")
    ssh.add_argument("--log", default=os.environ.get("DEVSY_AGENT_LOG", ""),
                     help="write debug logs to this file (default: warnings on stderr)")
    sub.add_parser("setup", help="unpack, create the host key, print a JSON report")
    sub.add_parser("version", help="print the build and Python tag as JSON")
    sub.add_parser("runtime-serve", help="install and run a workspace's runtime; relay it on stdio (request on "
                                         "stdin, see runtime_serve.py)")
    remove = sub.add_parser("workspace-remove", help="remove a workspace's folder under the agent's home")
    remove.add_argument("--home", default="", help="the agent's home (default ~/.devsy-agent)")
    remove.add_argument("--workspace", required=True, help="the workspace id")
    return parser


def _configure_logging(path: str) -> None:
    if path:
        logging.basicConfig(filename=path, level=logging.DEBUG,
                            format="%(asctime)s %(process)d %(threadName)s %(name)s %(levelname)s %(message)s")
        return
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="devsy-agent: %(message)s")
    # paramiko logs a dropped connection as an error with a traceback; for us that is how every session may end.
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)


def main(argv: list, site: str, build: str) -> int:
    args = _parser().parse_args(argv)
    state_dir = os.path.dirname(site)
    tag = "cp%d%d" % sys.version_info[:2]
    if args.command == "ssh-server":
        _configure_logging(args.log)
        from .server import serve_stdio

        return serve_stdio(state_dir, args.workdir)
    import json

    if args.command == "runtime-serve":
        from .runtime_serve import serve

        return serve()
    if args.command == "workspace-remove":
        from .runtime_install import agent_home, remove_workspace

        print(json.dumps({"removed": remove_workspace(agent_home(args.home), args.workspace)}))
        return 0

    report = {"build": build, "python": tag, "python_version": sys.version.split()[0], "site": site}
    if args.command == "setup":
        from .hostkey import public_line
        from .stamps import guest_stamps, search_path_dirs

        report["host_key"] = public_line(state_dir)
        # What the next `devsy up` may check from the host instead of running anything here: this file, the
        # interpreter the launcher found (the links from its name to it) and the PATH folders that lookup read.
        report["stamps"] = guest_stamps([sys.argv[0], sys.executable, *search_path_dirs("python3")])
    print(json.dumps(report, sort_keys=True))
    return 0
