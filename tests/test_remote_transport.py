"""The provider's exec command and the runtime link end what they start: a command past its deadline, or one that
outlives the end of its input, is killed with its group and reaped, leaving no process (or zombie) behind."""

from __future__ import annotations

import subprocess

import psutil
import pytest

from devsy.driver.remote.errors import RemoteUnreachable
from devsy.driver.remote.link import _end
from devsy.driver.remote.transport import ExecTransport


def test_a_command_past_its_deadline_is_killed_and_reaped():
    transport = ExecTransport(["sh", "-c", 'exec "$@"', "exec-command"])
    before = {child.pid for child in psutil.Process().children()}
    with pytest.raises(RemoteUnreachable, match="did not finish within"):
        transport.run(["sleep", "300"], timeout=0.5)
    # A KILLed child nobody waits for stays a zombie child of ours (its cmdline gone, its pid still ours).
    left = [f"{c.pid} {c.status()}" for c in psutil.Process().children() if c.pid not in before]
    assert left == [], "the timed-out exec command was not reaped"


def test_ending_a_link_kills_an_exec_command_that_outlives_its_input_with_its_group():
    # Ignores the end of its input (the remote lease) and has a child of its own in its group.
    proc = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout is not None
    member = psutil.Process(int(proc.stdout.readline()))
    _end(proc, grace=0.5)  # what it waits for never comes: the grace's length changes nothing but the run time
    proc.stdout.close()
    assert proc.returncode is not None, "the exec command was not reaped"
    try:
        member.wait(timeout=10)  # not our child: gone once its new parent reaps it
    except psutil.TimeoutExpired:
        pytest.fail(f"a member of the exec command's group ({member.pid}) outlived the link")
    except psutil.NoSuchProcess:
        pass
