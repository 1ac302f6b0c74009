"""The host side of `msb exec --stream`: pipes, threads, cancellation and exit codes, exercised for real.

A booted VM is not available on every host, so `msb` is replaced here by a stand-in that runs the command on the host
with the same argument contract (`exec NAME [--user U] [--workdir D] [--env K=V] --stream -- argv`). What is under
test is devsy's plumbing around the process, not msb; the real path is covered by test_msb_exec_kvm.py on KVM hosts.
"""

from __future__ import annotations

import io
import os
import stat
import threading
import time
from pathlib import Path

import psutil
import pytest

from devsy.driver.base import CancelToken, ExecRequest
from devsy.driver.microsandbox.exec_stream import CANCELLED_EXIT_CODE, run_exec
from devsy.driver.microsandbox.locate import MsbBinary
from devsy.driver.microsandbox.msb import MsbClient

STAND_IN = """#!/bin/sh
[ "$1" = exec ] || exit 2
shift 2
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --env) export "$2"; shift 2 ;;
    --workdir) cd "$2" || exit 1; shift 2 ;;
    --user) shift 2 ;;
    --stream) shift ;;
    *) echo "stand-in: unexpected $1" >&2; exit 2 ;;
  esac
done
shift
exec "$@"
"""


@pytest.fixture
def client(tmp_path: Path) -> MsbClient:
    script = tmp_path / "msb-exec-stand-in"
    script.write_text(STAND_IN)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return MsbClient(MsbBinary(str(script), (0, 7, 11)))


def _run(client: MsbClient, argv: list[str], stdin: bytes | None = None, **kw) -> tuple[int, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    result = run_exec(client, "ws", ExecRequest(argv=argv, stdout=out, stderr=err,
                                                stdin=io.BytesIO(stdin) if stdin is not None else None, **kw))
    assert not [t for t in threading.enumerate() if t.name.startswith("devsy-msb-exec")], "threads left running"
    return result.exit_code, out.getvalue(), err.getvalue()


def test_bytes_round_trip_exactly_and_streams_stay_separate(client: MsbClient) -> None:
    data = bytes([0x00, 0xFF, 0x80, 0x0A, 0x0D, 0x01]) + os.urandom(12 * 1024 * 1024)
    assert _run(client, ["cat"], data) == (0, data, b"")
    assert _run(client, ["sh", "-c", "printf out; printf err >&2; exit 7"]) == (7, b"out", b"err")
    assert _run(client, ["no-such-command-devsy"])[0] == 127
    assert _run(client, ["sh", "-c", 'printf "%s|%s" "$FOO" "$(pwd)"'], env={"FOO": "a b$(x)"},
                workdir="/tmp") == (0, b"a b$(x)|/tmp", b"")


def test_empty_input_and_early_exit_without_reading_input(client: MsbClient) -> None:
    assert _run(client, ["cat"]) == (0, b"", b"")
    assert _run(client, ["true"], os.urandom(12 * 1024 * 1024))[0] == 0


class _Announcing(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.wrote = threading.Event()

    def write(self, data) -> int:  # noqa: ANN001
        self.wrote.set()
        return super().write(data)


def test_cancel_stops_the_tree_and_closes_owned_stdin(client: MsbClient) -> None:
    reader, writer = os.pipe()
    stdin = os.fdopen(reader, "rb", buffering=0)
    out = _Announcing()
    request = ExecRequest(argv=["sh", "-c", "echo ready; sleep 1000 & wait"], stdout=out, stderr=io.BytesIO(),
                          stdin=stdin, owns_stdin=True, cancel=CancelToken())
    threading.Thread(target=lambda: out.wrote.wait(60) and request.cancel.cancel(), daemon=True).start()
    started = time.monotonic()
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    assert run_exec(client, "ws", request).exit_code == CANCELLED_EXIT_CODE
    assert time.monotonic() - started < 30 and out.getvalue() == b"ready\n"
    assert stdin.closed, "an owned stdin is closed on cancel so a blocked read ends"
    assert not [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()
                and p.status() != psutil.STATUS_ZOMBIE]
    os.close(writer)


def test_caller_owned_stdin_is_never_closed(client: MsbClient) -> None:
    reader, writer = os.pipe()
    os.write(writer, b"hello")
    os.close(writer)
    with os.fdopen(reader, "rb", buffering=0) as stdin:
        out = io.BytesIO()
        assert run_exec(client, "ws", ExecRequest(argv=["cat"], stdout=out, stderr=io.BytesIO(), stdin=stdin)
                        ).exit_code == 0
        assert out.getvalue() == b"hello" and not stdin.closed


class _GoneReader(io.BytesIO):
    def write(self, data) -> int:  # noqa: ANN001
        raise BrokenPipeError("the reader went away")


def test_output_nobody_reads_ends_the_command(client: MsbClient) -> None:
    request = ExecRequest(argv=["yes"], stdout=_GoneReader(), stderr=io.BytesIO(), cancel=CancelToken())
    assert run_exec(client, "ws", request).exit_code == CANCELLED_EXIT_CODE
    assert request.cancel.is_cancelled()
