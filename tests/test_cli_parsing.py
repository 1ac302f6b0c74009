"""Where `devsy exec`'s guest command starts: its own options must never be taken for devsy's."""

from __future__ import annotations

import pytest

from devsy.cli.main import EXEC_VALUE_OPTIONS, GLOBAL_VALUE_OPTIONS, _split_guest_command, build_parser


def parsed(*argv: str) -> tuple[str, str, list[str], str]:
    head, guest = _split_guest_command(list(argv))
    args = build_parser().parse_args(head)
    return args.workspace, args.user, [*args.argv, *guest], str(args.home)


@pytest.mark.parametrize(("argv", "expected"), [
    (("exec", "ws", "id", "-u"), ("ws", "", ["id", "-u"], "None")),
    (("exec", "ws", "ls", "-la", "--", "x"), ("ws", "", ["ls", "-la", "--", "x"], "None")),
    (("exec", "ws", "-u", "dev", "id", "-u"), ("ws", "dev", ["id", "-u"], "None")),
    (("exec", "-u", "dev", "ws", "--", "id", "-u"), ("ws", "dev", ["id", "-u"], "None")),
    (("exec", "ws", "--user", "dev", "--", "--weird"), ("ws", "dev", ["--weird"], "None")),
    (("--home", "/h", "exec", "--env", "A=1", "ws", "printf", "--", "-x"), ("ws", "", ["printf", "--", "-x"], "/h")),
    (("exec", "ws", "sh", "-c", "exec id -u"), ("ws", "", ["sh", "-c", "exec id -u"], "None")),
])
def test_the_guest_command_keeps_its_own_options(argv, expected):
    assert parsed(*argv) == expected


def test_other_commands_are_untouched():
    assert _split_guest_command(["ssh", "ws", "--command", "exec", "--", "x"]) == (
        ["ssh", "ws", "--command", "exec", "--", "x"], [])


def test_the_value_option_tables_match_the_parser():
    parser = build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    for table, owner in ((GLOBAL_VALUE_OPTIONS, parser), (EXEC_VALUE_OPTIONS, subcommands["exec"])):
        takes_value = {s for a in owner._actions for s in a.option_strings if a.nargs != 0}
        assert set(table) == takes_value


def test_the_ssh_path_imports_no_driver_or_backend_module() -> None:
    """`devsy ssh` runs often and starts in tens of milliseconds: its parser must not pull in the driver layer (the
    provider table only feeds `devsy up --help`)."""
    import json
    import subprocess
    import sys

    probe = ("import json, sys\n"
             "from devsy.cli.main import build_parser\n"
             "import devsy.cli.ssh_command, devsy.ssh.mux.client\n"
             "build_parser(['ssh', 'ws', '--command', 'true'])\n"
             # A None entry is devsy's "unavailable" mark for docker's ssh transport, not a loaded module.
             "print(json.dumps(sorted(n for n, m in sys.modules.items() if m is not None)))\n")
    loaded = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True,
                                       timeout=60).stdout)
    heavy = [name for name in loaded if name.startswith(("devsy.driver", "docker", "paramiko", "grpc"))]
    assert heavy == [], f"the ssh path imported {heavy}"


def test_a_relative_workdir_is_refused_before_anything_runs(capsys) -> None:
    """The engine refuses a relative working directory and the agent would resolve it against its own: both paths
    of `devsy exec` refuse it the same way, at parse time."""
    with pytest.raises(SystemExit) as exited:
        parsed("exec", "-w", "src", "ws", "pwd")
    assert exited.value.code == 2
    assert "'src' is not an absolute path in the workspace" in capsys.readouterr().err
    assert parsed("exec", "-w", "/tmp", "ws", "pwd")[2] == ["pwd"]
