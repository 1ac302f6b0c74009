"""Exec in the fake runtime: commands are simulated by name, from a small table that covers the conformance cases.

Real POSIX argv (what the conformance suite runs on every runtime) map to the same observable behaviour here:
`cat`, `true`, `printf '[%s]\\n' ARGS`, `sleep N` (a real child process, so cancellation has a tree to reap), and
the exact `sh -c` scripts of devsy.runtime.conformance.commands. A few more names help direct tests: `echo ARGS`,
`stderr TEXT`, `exit N`, `signal NAME`, `signal-only NAME` (exit_code 0 beside the name, as a Go provider may
send), `printenv NAME`, and `spawn-tree` (leaves a child in the provider's group
and a setsid'd one behind, for the supervisor's tests). Anything else exits 127 like a missing command.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
from collections.abc import Callable, Iterator

from devsy.driver.base import ExecRequest, ExecResult
from devsy.runtime.conformance import commands as c

# How often a blocked stdin read looks at the cancel flag (select() returns at once when data arrives).
_CANCEL_POLL_S = 0.2


def stdin_chunks(request: ExecRequest) -> Iterator[bytes]:
    """The request's stdin until EOF, stopping early on cancellation."""
    if request.stdin is None:
        return
    fd = request.stdin.fileno()
    while not request.cancel.is_cancelled():
        try:
            ready, _, _ = select.select([fd], [], [], _CANCEL_POLL_S)
            if not ready:
                continue
            data = os.read(fd, 65536)
        except (OSError, ValueError):
            return  # closed under us on cancellation
        if not data:
            return
        yield data


def _cat(request: ExecRequest) -> ExecResult:
    for chunk in stdin_chunks(request):
        request.stdout.write(chunk)
    return ExecResult(0)


def _printf(request: ExecRequest) -> ExecResult:
    if request.argv[1:2] != [c.PRINTF_FORMAT]:
        request.stderr.write(b"fake printf: only the format '[%s]\\n' is simulated\n")
        return ExecResult(2)
    request.stdout.write(c.printf_output(request.argv[2:]))
    return ExecResult(0)


def sleep_child(seconds: str, request: ExecRequest) -> ExecResult:
    """A real `sleep` child in the provider's process group; cancellation kills and reaps it."""
    child = subprocess.Popen(["sleep", seconds], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,  # noqa: S603,S607
                             stderr=subprocess.DEVNULL)
    unsubscribe = request.cancel.on_cancel(child.kill)
    try:
        code = child.wait()
    finally:
        unsubscribe()
    if code < 0:
        return ExecResult(128 - code, signal.Signals(-code).name)
    return ExecResult(code)


def _ready_then_sleep(request: ExecRequest) -> ExecResult:
    request.stdout.write(c.READY_LINE)
    return sleep_child("300", request)


def _sleep(request: ExecRequest) -> ExecResult:
    return sleep_child(request.argv[1] if len(request.argv) > 1 else "1", request)


def _spawn_tree(request: ExecRequest) -> ExecResult:
    """Leave two real processes behind: one in the provider's process group, one in its own session (setsid, like
    a detached VMM). The supervisor must kill the first with the provider and leave the second alone."""
    quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    child = subprocess.Popen(["sleep", "300"], **quiet)  # noqa: S603,S607
    detached = subprocess.Popen(["sleep", "301"], start_new_session=True, **quiet)  # noqa: S603,S607
    request.stdout.write(f"child={child.pid} detached={detached.pid}\n".encode())
    return ExecResult(0)


def _echo(request: ExecRequest) -> ExecResult:
    request.stdout.write((" ".join(request.argv[1:]) + "\n").encode())
    return ExecResult(0)


def _stderr(request: ExecRequest) -> ExecResult:
    request.stderr.write((" ".join(request.argv[1:]) + "\n").encode())
    return ExecResult(0)


def _exit(request: ExecRequest) -> ExecResult:
    try:
        return ExecResult(int(request.argv[1]))
    except (IndexError, ValueError):
        request.stderr.write(b"fake exit: needs an integer\n")
        return ExecResult(2)


def _signal(request: ExecRequest) -> ExecResult:
    name = request.argv[1] if len(request.argv) > 1 else "SIGTERM"
    number = getattr(signal, name, signal.SIGTERM)
    return ExecResult(128 + int(number), signal.Signals(number).name)


def _signal_only(request: ExecRequest) -> ExecResult:
    """Killed by a signal, reported as some Go-built providers do: the name as given (e.g. TERM) and exit_code 0."""
    return ExecResult(0, request.argv[1] if len(request.argv) > 1 else "TERM")


def _printenv(request: ExecRequest) -> ExecResult:
    if len(request.argv) < 2 or request.argv[1] not in request.env:
        return ExecResult(1)
    request.stdout.write((request.env[request.argv[1]] + "\n").encode())
    return ExecResult(0)


def _script(stdout: bytes = b"", stderr: bytes = b"", code: int = 0, sig: str = "") -> Callable[..., ExecResult]:
    def run(request: ExecRequest) -> ExecResult:
        if stdout:
            request.stdout.write(stdout)
        if stderr:
            request.stderr.write(stderr)
        return ExecResult(code, sig)

    return run


BY_NAME: dict[str, Callable[[ExecRequest], ExecResult]] = {
    "cat": _cat, "true": lambda _: ExecResult(0), "printf": _printf, "sleep": _sleep, "echo": _echo,
    "stderr": _stderr, "exit": _exit, "signal": _signal, "signal-only": _signal_only, "printenv": _printenv,
    "spawn-tree": _spawn_tree,
}
BY_ARGV: dict[tuple[str, ...], Callable[[ExecRequest], ExecResult]] = {
    tuple(c.SHELL): _script(stdout=c.SHELL_STDOUT),
    tuple(c.STDERR_ONLY): _script(stderr=c.STDERR_ONLY_STDERR),
    tuple(c.FAIL): _script(stderr=c.FAIL_STDERR, code=c.FAIL_CODE),
    tuple(c.SIGNAL): _script(code=128 + c.SIGNAL_NUMBER, sig="SIGTERM"),
    tuple(c.READY_THEN_SLEEP): _ready_then_sleep,
}


# devsy's agent delivery runs `/bin/sh -c SCRIPT devsy-check|devsy-install ...` (devsy/agent/delivery.py); in a guest
# without sha256sum and python3 its script says this and exits 12, which devsy reports as "ssh will not work".
_AGENT_SCRIPT_NAMES = ("devsy-check", "devsy-install")
_NO_AGENT_TOOLS_STDERR = b"the guest has neither sha256sum nor python3 to verify the agent\n"
_NO_AGENT_TOOLS_EXIT = 12


def is_agent_script(request: ExecRequest) -> bool:
    return request.argv[:2] == ["/bin/sh", "-c"] and len(request.argv) > 3 and request.argv[3] in _AGENT_SCRIPT_NAMES


def no_agent_tools(request: ExecRequest) -> ExecResult:
    """The agent script's answer in a guest that has no tool to verify the agent with."""
    request.stderr.write(_NO_AGENT_TOOLS_STDERR)
    return ExecResult(_NO_AGENT_TOOLS_EXIT)


def run(request: ExecRequest, handler: Callable[[ExecRequest], ExecResult] | None = None) -> ExecResult:
    """Simulate `request.argv` (with `handler` when the caller chose one); output writes raise BrokenPipeError once
    the stream's reader is gone."""
    handler = handler or BY_ARGV.get(tuple(request.argv)) or BY_NAME.get(request.argv[0])
    if handler is None:
        request.stderr.write(f"fake runtime: {request.argv[0]}: no such scenario\n".encode())
        return ExecResult(127)
    with contextlib.suppress(BrokenPipeError):
        return handler(request)
    return ExecResult(130, "")  # the reader went away: the RPC is over, this result is never sent
