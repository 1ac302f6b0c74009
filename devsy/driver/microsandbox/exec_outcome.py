"""Whose failure a nonzero `msb exec` status is: the guest command's, or msb's own (the sandbox vanished or stopped
while the command ran). Both exit 1 with text on stderr, so the text alone cannot decide; the sandbox's state can.

Only when the output looks like msb's failure (stderr ends with an `error:` line, as msb prints every error) or like
a killed session (a status above 128) is the sandbox inspected: one extra `msb inspect`, never for an ordinary
nonzero exit. A sandbox that still runs leaves the status to the guest: a guest that prints `error: x` and exits 1
is reported as exit status 1.

Not done: a marker printed by a guest-side wrapper (it would need /bin/sh in every image, and a byte-faithful stderr
would have to be edited to strip it). So an msb failure while the sandbox still runs (an agent relay that cannot be
reached) is still reported as the status msb exited with.

Signals: msb reports only an exit status, 128+N both for a guest command killed by signal N and for one that ran
`exit 128+N` (and for msb's own session being cut off, told apart above by the sandbox's state). Nothing msb prints
says which, so this driver never names a signal: a killed command comes back as ExecExit{exit_code: 128+N, signal:
""}, still a failure, and `devsy exec` still exits 128+N. Naming it would need the guest-side wrapper declined above
(the Docker driver has one: devsy/driver/docker/exec_signal.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from devsy.driver.microsandbox.details import RUNNING
from devsy.driver.microsandbox.msb import MsbClient, error_summary, sandbox_missing
from devsy.errors import DriverError, NotFound
from devsy.redaction import redact_text

QUICK_TIMEOUT_S = 60.0
_SIGNALLED = 128  # statuses above this are a killed process: a session cut off, or a guest command killed


class ExecInterrupted(DriverError):
    """The sandbox stopped while a command ran in it: the command's exit status never arrived."""

    kind = "exec-interrupted"


def msb_error_line(stderr_tail: bytes) -> str:
    """The last stderr line when it is shaped like msb's error report (`error: ...`), else ""."""
    lines = [line.strip() for line in stderr_tail.decode("utf-8", "replace").splitlines() if line.strip()]
    # msb may follow its error line with `→ detail` lines; the report starts at the last `error:` line.
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].startswith("error:"):
            return "\n".join(lines[index:]) if all(x.startswith("→") for x in lines[index + 1:]) else ""
        if not lines[index].startswith("→"):
            return ""
    return ""


def check_exit(msb: MsbClient, name: str, exit_code: int, stderr_tail: bytes, *, secrets: Sequence[str]) -> None:
    """Raise NotFound or ExecInterrupted when a nonzero `exit_code` was msb's failure; return when it is the
    guest's. An inspect that fails for another reason is raised (msb's state is unknown, so is the status)."""
    reported = msb_error_line(stderr_tail)
    if not reported and exit_code <= _SIGNALLED:
        return
    said = f"; msb reported: {redact_text(error_summary(reported), secrets)}" if reported else ""
    args = ["inspect", name, "--format", "json"]
    action = f"checking sandbox {name} after a command in it exited {exit_code}"
    result = msb.run(args, action=action, timeout=QUICK_TIMEOUT_S, check=False)
    if result.returncode != 0 and sandbox_missing(result.stderr, name):
        raise NotFound(f"sandbox {name} disappeared while a command ran in it (msb exited {exit_code}){said}",
                       hint="something removed the workspace's sandbox; run `devsy up` to create it again")
    if result.returncode != 0:
        raise msb.failure(args, result, action=action)
    try:
        status = str(json.loads(result.stdout).get("status", ""))
    except (ValueError, AttributeError) as exc:
        raise DriverError(f"{action}: `msb inspect` printed no JSON object",
                          hint="check `msb --version` (devsy needs 0.7.11 or newer)") from exc
    if status != RUNNING:
        now = status.lower() or "in an unknown state"
        raise ExecInterrupted(f"sandbox {name} stopped while a command ran in it (now {now}; msb exited "
                              f"{exit_code}){said}",
                              hint="the command's exit status was lost; start the workspace with `devsy start` "
                                   "and run the command again")
