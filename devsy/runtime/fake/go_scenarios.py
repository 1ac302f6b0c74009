"""The fake runtime's `conformance` mode: the Go SDK fake's scenario vocabulary, so the Go SDK's own conformance
suite (profile `gofake`) passes against this fake as it does against the Go one.

argv[0] names the scenario, as in the Go fake (devsy-runtime-sdk conformance/fake/conformance.go): echo, stderr and
duplex copy stdin to stdout, stderr or both until close_stdin; arguments prints each further argument followed by
a NUL; shell (or exactly `/bin/sh -c "printf 'shell stdout\\n'"`) prints "shell stdout"; nonzero writes
"diagnostic" to stderr and exits 7; signal ends killed by SIGTERM; early-exit exits 0 without reading its input;
block prints "ready" and waits until the call is cancelled or its deadline passes. Where this differs from the Go
fake it follows devsy's providers: signal is reported as exit 143 with signal "SIGTERM" (the Go fake sends exit 0,
signal "TERM"; both are failures by the protocol), and an argv that names no scenario falls back to the ordinary
simulation (devsy.runtime.fake.scenarios) instead of INVALID_ARGUMENT.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from devsy.driver.base import ExecRequest, ExecResult
from devsy.runtime.fake.scenarios import stdin_chunks

# What the Go fake's Logs returns in every mode; the Go suite expects it with the `gofake` profile.
LOGS = b"fake stdout\x00\xff\nfake stderr\n"
SHELL_ARGV = ["/bin/sh", "-c", "printf 'shell stdout\\n'"]
SHELL_STDOUT = b"shell stdout\n"
NONZERO_STDERR = b"diagnostic"
NONZERO_CODE = 7
READY = b"ready\n"
_CANCELLED_EXIT = 130


def _copy(to_stdout: bool, to_stderr: bool) -> Callable[[ExecRequest], ExecResult]:
    def run(request: ExecRequest) -> ExecResult:
        for chunk in stdin_chunks(request):
            if to_stdout:
                request.stdout.write(chunk)
            if to_stderr:
                request.stderr.write(chunk)
        return ExecResult(0)

    return run


def _arguments(request: ExecRequest) -> ExecResult:
    request.stdout.write(b"".join(argument.encode() + b"\x00" for argument in request.argv[1:]))
    return ExecResult(0)


def _shell(request: ExecRequest) -> ExecResult:
    request.stdout.write(SHELL_STDOUT)
    return ExecResult(0)


def _nonzero(request: ExecRequest) -> ExecResult:
    request.stderr.write(NONZERO_STDERR)
    return ExecResult(NONZERO_CODE)


def _signal(_: ExecRequest) -> ExecResult:
    return ExecResult(128 + int(signal.SIGTERM), signal.SIGTERM.name)


def _block(request: ExecRequest) -> ExecResult:
    request.stdout.write(READY)
    request.stdout.flush()
    request.cancel.wait()  # only the host's cancel or deadline ends it (the SDK answers CANCELLED / DEADLINE_EXCEEDED)
    return ExecResult(_CANCELLED_EXIT)


BY_SCENARIO: dict[str, Callable[[ExecRequest], ExecResult]] = {
    "echo": _copy(True, False), "stderr": _copy(False, True), "duplex": _copy(True, True),
    "arguments": _arguments, "shell": _shell, "nonzero": _nonzero, "signal": _signal,
    "early-exit": lambda _: ExecResult(0), "block": _block,
}


def handler(request: ExecRequest) -> Callable[[ExecRequest], ExecResult] | None:
    """The scenario `request` names, or None (the caller simulates it the ordinary way)."""
    if request.argv == SHELL_ARGV:
        return _shell
    return BY_SCENARIO.get(request.argv[0]) if request.argv else None
