"""Bounded subprocesses: each runs in its own process group, which is killed when its timeout passes.

Every command a case runs is kept as a CommandRecord (argv with secrets masked, exit code, duration, output tails)
so a failed case can show exactly what it ran.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

from devsy import process_tree
from devsy.redaction import mask_flag_values
from devsy.stack_dump import STACK_DUMP_SIGNAL

TAIL_LINES = 40
TAIL_CHARS = 8000
# A command killed at its timeout keeps a longer stderr tail: the stacks its devsy processes printed (see below).
TIMED_OUT_TAIL_LINES = 400
TIMED_OUT_TAIL_CHARS = 40000
# `--env K=V` and `--provider-option K=V` values may be secrets; records keep the key only.
_SECRET_FLAGS = frozenset({"--env", "--remote-env", "--secret"})
KILL_GRACE = 3.0


def tail(data: bytes | str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last `lines` lines (and at most `chars` characters) of an output stream, decoded leniently."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    kept = "\n".join(text.splitlines()[-lines:])
    return kept[-chars:]


def mask_argv(argv: list[str]) -> list[str]:
    """argv with the values of secret-carrying flags replaced by `K=***`."""
    return mask_flag_values(argv, _SECRET_FLAGS)


@dataclass
class CommandRecord:
    argv: list[str]
    exit_code: int | None
    duration: float
    stdout_tail: str
    stderr_tail: str
    timed_out: bool = False
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        status = "timed out" if self.timed_out else f"exit {self.exit_code}"
        return f"$ {' '.join(self.argv)}  -> {status} in {self.duration:.2f}s"


@dataclass
class CompletedCommand:
    argv: list[str]
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    duration: float
    timed_out: bool

    def record(self, note: str = "") -> CommandRecord:
        return CommandRecord(
            argv=mask_argv(self.argv),
            exit_code=self.exit_code,
            duration=round(self.duration, 3),
            stdout_tail=tail(self.stdout),
            stderr_tail=tail(self.stderr, TIMED_OUT_TAIL_LINES, TIMED_OUT_TAIL_CHARS) if self.timed_out
            else tail(self.stderr),
            timed_out=self.timed_out,
            note=note,
        )


def run_bounded(
    argv: list[str],
    timeout: float,
    env: dict[str, str] | None = None,
    input_bytes: bytes | None = None,
    cwd: str | None = None,
) -> CompletedCommand:
    """Run argv in its own process group; on timeout kill the whole group and return with timed_out=True."""
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if input_bytes is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    timed_out = False
    try:
        stdout, stderr = proc.communicate(input=input_bytes, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        ask_devsy_for_stacks(proc.pid)
        process_tree.stop_child(proc, grace=KILL_GRACE, kill_wait=KILL_GRACE)
        stdout, stderr = _drain(proc)
    except BaseException:
        # Interrupted (Ctrl-C, pytest-timeout): never leave the group running behind us.
        process_tree.stop_child(proc, grace=KILL_GRACE, kill_wait=KILL_GRACE)
        raise
    return CompletedCommand(
        argv=argv,
        exit_code=None if timed_out else proc.returncode,
        stdout=stdout,
        stderr=stderr,
        duration=time.monotonic() - started,
        timed_out=timed_out,
    )


def ask_devsy_for_stacks(pgid: int) -> list[int]:
    """Signal the devsy processes of group `pgid` to print their threads' stacks on stderr (devsy/stack_dump.py);
    returns their pids. Sent before the group's SIGTERM: pending standard signals are delivered lowest number first,
    so each dump is written before the process starts to unwind."""
    asked = []
    for pid in process_tree.group_members(pgid):
        try:
            argv = psutil.Process(pid).cmdline()
        except psutil.Error:
            continue  # it ended meanwhile
        # devsy runs as `python .../bin/devsy ...` or `python -m devsy ...` (OpenSSH's ProxyCommand)
        if argv and os.path.basename(argv[0]).startswith("python") and any(a.endswith("devsy") for a in argv[1:3]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, STACK_DUMP_SIGNAL)
                asked.append(pid)
    return asked


def _drain(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    # After the kill, collect what was already written without blocking on pipes a grandchild may still hold.
    result: dict[str, bytes] = {"out": b"", "err": b""}

    def read() -> None:
        try:
            out, err = proc.communicate()
            result["out"], result["err"] = out or b"", err or b""
        except (ValueError, OSError):
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(KILL_GRACE)
    return result["out"], result["err"]


@dataclass
class CommandLog:
    """Every command one case ran, in order."""

    records: list[CommandRecord] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, record: CommandRecord) -> None:
        with self.lock:
            self.records.append(record)

    def render(self) -> str:
        parts = []
        for record in self.records:
            parts.append(record.summary())
            if record.note:
                parts.append(f"  note: {record.note}")
            for name, text in (("stdout", record.stdout_tail), ("stderr", record.stderr_tail)):
                if text:
                    parts.append(f"  {name} (tail):\n" + "\n".join(f"    {line}" for line in text.splitlines()))
        return "\n".join(parts)
