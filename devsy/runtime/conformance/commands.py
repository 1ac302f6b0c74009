"""The commands the conformance cases run, as per-provider tables (TABLES, chosen by `devsy-conformance
--commands`): plain POSIX argv that any real runtime runs as they are and devsy's fake simulates by name (see
devsy.runtime.fake.scenarios), or the Go SDK fake's scenario names (see devsy.runtime.fake.go_scenarios).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace

CAT = ["cat"]
TRUE = ["true"]
SLEEP = ["sleep", "300"]
# Prints a line once running, so a case knows the command started before it cancels it.
READY_THEN_SLEEP = ["sh", "-c", "echo ready; exec sleep 300"]
READY_LINE = b"ready\n"

# printf interprets the \n in its format; one bracketed line per argument shows empty and spaced args exactly.
PRINTF_FORMAT = "[%s]\\n"
FIDELITY_ARGS = ["with space", "it's \"quoted\"", "$HOME;$(echo x)", "", "unicodé ✓ 日本", "-n", "\\t"]


def printf_argv(args: list[str]) -> list[str]:
    return ["printf", PRINTF_FORMAT, *args]


def printf_output(args: list[str]) -> bytes:
    return b"".join(b"[" + a.encode() + b"]\n" for a in args)


SHELL = ["sh", "-c", 'echo "$(( 6 * 7 ))"; echo "$0:$1"', "zero", "one"]
SHELL_STDOUT = b"42\nzero:one\n"

STDERR_ONLY = ["sh", "-c", "echo only-stderr >&2"]
STDERR_ONLY_STDERR = b"only-stderr\n"

FAIL = ["sh", "-c", "echo failing-on-purpose >&2; exit 3"]
FAIL_STDERR = b"failing-on-purpose\n"
FAIL_CODE = 3

SIGNAL = ["sh", "-c", "kill -TERM $$"]
SIGNAL_NUMBER = 15

BINARY = bytes([0x00, 0xFF, 0x80, 0x0A, 0x0D, 0x01])

# The workspace's main process: prints a known line (what Logs must return) and waits, ending at once on TERM so
# Stop is quick. Valid UTF-8 on purpose: log drivers that store text (Docker's json-file) keep it byte for byte.
WORKLOAD_ENTRYPOINT = "/bin/sh"
WORKLOAD_ARGS = ["-c", 'printf "devsy-conformance-logs \\001\\177 \\303\\251\\n"\n'
                       'trap "exit 0" TERM INT\nwhile sleep 1000 & wait $!; do :; done']
WORKLOAD_LOGS = b"devsy-conformance-logs \x01\x7f \xc3\xa9\n"


# -- per-provider command tables (as the Go SDK suite's GOHOST_PROFILE): what each exec case sends and expects -------

@dataclass(frozen=True)
class Exchange:
    """One command: its argv, the stdin the case sends, and the exact output and status it must produce."""

    argv: list[str]
    stdin: bytes = b""
    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0


@dataclass(frozen=True)
class CommandTable:
    """The commands the exec cases send to one kind of provider. `echo` copies stdin to stdout; `noop` exits 0 with
    no output given no input; `early_exit` exits 0 without reading its input; `ready` prints READY_LINE and then runs
    until cancelled. None: this kind of provider has no such command (the case is NOT-OFFERED, with this reason)."""

    name: str
    echo: list[str]
    noop: list[str]
    early_exit: list[str] | None
    ready: list[str] | None
    arguments: Callable[[list[str]], Exchange] | None
    shell: Exchange | None
    stderr_only: Exchange | None
    nonzero: Exchange | None
    signal: list[str] | None
    logs: bytes


_POSIX = CommandTable(
    name="posix", echo=CAT, noop=TRUE, early_exit=TRUE, ready=READY_THEN_SLEEP,
    arguments=lambda args: Exchange(printf_argv(args), stdout=printf_output(args)),
    shell=Exchange(SHELL, stdout=SHELL_STDOUT), stderr_only=Exchange(STDERR_ONLY, stderr=STDERR_ONLY_STDERR),
    nonzero=Exchange(FAIL, stderr=FAIL_STDERR, exit_code=FAIL_CODE), signal=SIGNAL, logs=WORKLOAD_LOGS)

# The Go SDK fake's `--mode conformance` scenario names (devsy's own fake offers the same in that mode).
_GOFAKE = CommandTable(
    name="gofake", echo=["echo"], noop=["early-exit"], early_exit=["early-exit"], ready=["block"],
    arguments=lambda args: Exchange(["arguments", *args], stdout=b"".join(a.encode() + b"\0" for a in args)),
    shell=Exchange(["/bin/sh", "-c", "printf 'shell stdout\\n'"], stdout=b"shell stdout\n"),
    stderr_only=Exchange(["stderr"], stdin=STDERR_ONLY_STDERR, stderr=STDERR_ONLY_STDERR),
    nonzero=Exchange(["nonzero"], stderr=b"diagnostic", exit_code=7), signal=["signal"],
    logs=b"fake stdout\x00\xff\nfake stderr\n")

# The Go SDK fake in its other modes: every Exec echoes its input and exits 0, whatever the argv.
_ECHO = CommandTable(name="echo", echo=["echo"], noop=["echo"], early_exit=None, ready=None, arguments=None,
                     shell=None, stderr_only=None, nonzero=None, signal=None, logs=_GOFAKE.logs)

# posix: real commands, for providers backed by real containers. pyfake: what devsy-fake-runtime simulates in its
# ordinary modes (exactly the posix commands, by name). gofake: scenario names, for a fake in `conformance` mode.
# echo: a provider whose Exec only echoes (the Go fake outside `conformance` mode).
TABLES: dict[str, CommandTable] = {"posix": _POSIX, "pyfake": replace(_POSIX, name="pyfake"), "gofake": _GOFAKE,
                                   "echo": _ECHO}
# The default table for a provider executable by its file name, and by its --mode; any other provider gets posix.
DEFAULT_BY_EXECUTABLE: dict[str, tuple[str, str]] = {"devsy-fake-runtime": ("pyfake", "gofake"),
                                                     "go-fake-runtime": ("echo", "gofake")}


def default_table(executable: str, args: list[str]) -> str:
    """The table a provider gets unless --commands says otherwise: for the fakes, by whether `--mode conformance`
    (the Go fake's scenario vocabulary, which devsy's fake speaks in that mode too) is among its arguments."""
    ordinary, conformance = DEFAULT_BY_EXECUTABLE.get(os.path.basename(executable), ("posix", "posix"))
    return conformance if _mode(args) == "conformance" else ordinary


def _mode(args: list[str]) -> str:
    """The --mode value, in every form the fakes' parsers take (Go's flag package: -mode too; `=` or separate)."""
    mode = ""
    for index, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if name in ("--mode", "-mode"):
            mode = value if equals else (args[index + 1] if index + 1 < len(args) else "")
    return mode


def devsy_built(executable: str) -> bool:
    """Whether the provider is one of devsy's own (devsy-*): they are held to devsy's policy checks too."""
    return os.path.basename(executable).startswith("devsy-")
