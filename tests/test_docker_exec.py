"""`devsy exec` on the real engine: exit codes, byte-exact streams, and cancellation of the process tree."""

from __future__ import annotations

import hashlib
import io
import os
import re
import signal
import subprocess

import pytest

from helpers.cli import DEVSY, HOST_NET, cli_env
from helpers.projects import make_project


@pytest.fixture
def running(devsy, ws_id, guest_image, tmp_path) -> str:
    devsy.up(make_project(tmp_path / "p", {"image": guest_image}), "--id", ws_id, *HOST_NET)
    return ws_id


def test_exit_code_is_propagated(devsy, running):
    result = devsy.run("exec", running, "--", "sh", "-c", "exit 23")
    assert result.returncode == 23


def test_one_mib_of_random_bytes_roundtrips_exactly(devsy, running):
    data = os.urandom(1 << 20)
    result = devsy.run("exec", running, "--", "cat", input=data)
    assert result.returncode == 0
    assert hashlib.sha256(result.stdout).hexdigest() == hashlib.sha256(data).hexdigest()


def test_stderr_is_separate_and_exact(devsy, running):
    result = devsy.run("exec", running, "--", "sh", "-c", "printf 'out' ; printf 'e\\000rr' >&2")
    assert (result.stdout, result.stderr) == (b"out", b"e\x00rr")


def test_arguments_reach_the_guest_unchanged(devsy, running):
    args = ["a b", "'q'", '"dq"', "$HOME;$(echo x)", "", "ünï"]
    script = "import json,sys; print(json.dumps(sys.argv[1:]))"
    result = devsy.run("exec", running, "--", "python3", "-c", script, *args)
    import json

    assert json.loads(result.stdout) == args


def test_unknown_command_is_127(devsy, running):
    result = devsy.run("exec", running, "--", "no-such-command-here")
    assert result.returncode == 127 and b"not found" in result.stderr


def _guest_pids(devsy, workspace_id: str) -> set[int]:
    out = devsy.run("exec", workspace_id, "--", "ps", "-eo", "pid=,args=").stdout.decode()
    rows = [line.split(None, 1) for line in out.splitlines()]
    return {int(pid) for pid, args in rows if args.strip() == "sleep 4242"}


def test_sigint_kills_the_guest_tree_not_the_instance(devsy, running):
    env = cli_env(devsy)
    # The guest prints its pid only once both the child and itself run; we read that line before signalling.
    proc = subprocess.Popen([*DEVSY, "exec", running, "--", "sh", "-c", "sleep 4242 & echo ready $$; wait"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    line = proc.stdout.readline().decode()
    assert re.fullmatch(r"ready \d+\n", line), line
    assert len(_guest_pids(devsy, running)) == 1
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=15) == 128 + signal.SIGINT
    assert _guest_pids(devsy, running) == set()
    shell_pid = int(line.split()[1])
    assert devsy.run("exec", running, "--", "test", "-e", f"/proc/{shell_pid}").returncode == 1
    assert devsy.run("status", running, "--json").json["workspace"]["status"] == "running"


def test_driver_cancel_unblocks_a_command_reading_caller_stdin(devsy, running):
    """The command blocks reading stdin the caller owns (a pipe nobody writes); cancel must still return."""
    from devsy.driver.base import ExecRequest
    from devsy.driver.docker.driver import DockerDriver

    read_end, write_end = os.pipe()
    try:
        stdin = os.fdopen(read_end, "rb", buffering=0)
        out = io.BytesIO()
        request = ExecRequest(argv=["sh", "-c", "echo waiting; cat > /dev/null"], stdin=stdin, stdout=out,
                              stderr=io.BytesIO())
        ready = _OnFirstWrite(out, request.cancel.cancel)
        request.stdout = ready
        result = DockerDriver().exec(running, request)
        assert result.exit_code != 0
        assert not stdin.closed  # caller-owned: never closed by the driver
    finally:
        os.close(write_end)
        if not stdin.closed:
            stdin.close()


class _OnFirstWrite(io.RawIOBase):
    def __init__(self, inner: io.BytesIO, callback) -> None:
        self._inner, self._callback, self._fired = inner, callback, False

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._inner.write(data)
        if not self._fired:
            self._fired = True
            self._callback()
        return len(data)
