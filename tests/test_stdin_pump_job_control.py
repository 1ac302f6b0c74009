"""StdinPump reading its controlling terminal from a background job: where the kernel would fail the read instead of
stopping the job (SIGTTIN ignored or blocked), the pump reads, and the read's EIO ends the copy with end of input, as
it did before the pump stopped the job itself (test_exec_through_master covers the stop, `fg` and `kill %N`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# A terminal's session leader (the shell) starts a background job, its own process group, with input waiting on the
# terminal; the job copies the terminal with a StdinPump and reports how the copy ended. The shell reports the job's
# end, or that it was stopped (and then kills it).
_SESSION = r"""
import fcntl, json, os, signal, sys, termios
setup, report = sys.argv[1], int(sys.argv[2])
os.setsid()
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
job = os.fork()
if job == 0:
    os.setpgid(0, 0)
    if setup == "ignored":
        signal.signal(signal.SIGTTIN, signal.SIG_IGN)
    else:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTIN})  # the pump's thread inherits the mask
    from devsy.stdin_pump import StdinPump
    got = []
    pump = StdinPump(open(0, "rb", buffering=0, closefd=False), got.append, lambda: got.append(b"<eof>"))
    pump.start()
    pump.join(30)
    report_of_copy = {"alive": pump.is_alive(), "error": pump.error and repr(pump.error),
                      "input_error": getattr(pump.input_error, "errno", None),
                      "got": [g.decode() for g in got]}
    os.write(report, json.dumps(report_of_copy).encode())
    os._exit(0)
os.setpgid(job, job)
_, status = os.waitpid(job, os.WUNTRACED)
if os.WIFSTOPPED(status):
    os.killpg(job, signal.SIGKILL)
    os.waitpid(job, 0)
    os.write(report, json.dumps({"stopped_by": os.WSTOPSIG(status)}).encode())
"""


@pytest.mark.parametrize("setup", ["ignored", "blocked"])
def test_a_background_read_the_kernel_fails_ends_the_copy(setup: str) -> None:
    primary, terminal = os.openpty()
    report_r, report_w = os.pipe()
    try:
        os.write(primary, b"typed at the shell\n")  # waiting on the terminal before the job starts
        session = subprocess.Popen([sys.executable, "-c", _SESSION, setup, str(report_w)], stdin=terminal,
                                   stdout=terminal, stderr=subprocess.PIPE, pass_fds=(report_w,),
                                   env={**os.environ, "PYTHONPATH": str(REPO)})
        os.close(report_w)
        report_w = -1
        try:
            # Ends when the job and the session have closed their ends: the job's join(30) bounds both.
            with os.fdopen(report_r, "rb", closefd=False) as reports:
                report = reports.read()
            _, stderr = session.communicate(timeout=60)
        finally:
            if session.poll() is None:
                session.kill()
                session.wait()
    finally:
        for fd in (primary, terminal, report_r, report_w):
            if fd >= 0:
                os.close(fd)
    assert session.returncode == 0, stderr
    assert json.loads(report) == {"alive": False, "error": None, "input_error": 5, "got": ["<eof>"]}, (report, stderr)
