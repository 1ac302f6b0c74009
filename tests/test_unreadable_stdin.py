"""A devsy session whose own stdin cannot be read runs the command with end of input and exits with its status.

`nohup` under a terminal reopens stdin write-only, as `0>>file` does: every read of it fails (EBADF). OpenSSH's client
takes that as end of input, and so does devsy (stdin_pump.py): the command sees end of file and its exit status is the
session's. Before, the Docker driver's path reported "copying stdin into the command failed" and exited 1 after the
command had run. Both session paths (the agent, and a guest without python3), `devsy ssh` through the SSH master and
without it, and `devsy exec`; the real CLI on the real engine.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers.cli import DEVSY, cli_env

pytestmark = pytest.mark.docker

_SCRIPT = 'cat; echo "input ended"; exit 3'
_COMMANDS = {
    "ssh": lambda ws: ["ssh", ws, "--command", _SCRIPT],
    "ssh-without-master": lambda ws: ["ssh", ws, "--command", _SCRIPT],
    "exec": lambda ws: ["exec", ws, "--", "sh", "-c", _SCRIPT],
}


@pytest.mark.parametrize("command", sorted(_COMMANDS))
@pytest.mark.parametrize("path", ["agent", "exec"])
def test_a_write_only_stdin_is_end_of_input(request, devsy, tmp_path: Path, path: str, command: str) -> None:
    workspace = request.getfixturevalue("running_workspace" if path == "agent" else "exec_workspace")
    extra = {"DEVSY_SSH_MUX": "0"} if command == "ssh-without-master" else {}
    with open(tmp_path / "stdin", "ab") as write_only:
        result = subprocess.run([*DEVSY, *_COMMANDS[command](workspace)], stdin=write_only, capture_output=True,
                                timeout=120, env=cli_env(devsy, **extra))
    stderr = result.stderr.decode(errors="replace")
    assert (result.returncode, result.stdout) == (3, b"input ended\n"), f"{result.returncode}\n{stderr}"
    assert "failed" not in stderr, stderr
