"""The commands the conformance cases run. Plain POSIX argv, so any real runtime runs them as they are; the fake
runtime simulates exactly these (see devsy.runtime.fake.scenarios).
"""

from __future__ import annotations

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
