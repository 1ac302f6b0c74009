"""How an msb command line is shown: env values and mount sources masked by their flag, whatever their length.

msb takes env values on its command line (`-e K=V`) and mount sources as flag values (`--mount-dir SRC:DEST`), so the
argv devsy shows in an error or a log is masked by position here; the stderr msb prints is masked by value with
devsy/redaction.py. The argv itself is built in spec.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from devsy.driver.microsandbox.naming import LABEL_CREATED_VOLUMES
from devsy.redaction import MASK

_ENV_FLAGS = ("-e", "--env")
_SOURCE_FLAGS = ("--mount-dir", "--mount-file", "--mount-named")
# Label values that name mount sources (the volumes devsy created) are masked like the sources themselves.
_SECRET_LABELS = (LABEL_CREATED_VOLUMES,)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """`argv` with env values and mount sources masked (`-e KEY=***`, `--mount-dir ***:/dest:opts`)."""
    shown: list[str] = []
    pending = ""
    for index, arg in enumerate(argv):
        if arg == "--":
            return shown + list(argv[index:])  # the guest command itself is not a secret the driver knows of
        if pending in _ENV_FLAGS:
            shown.append(_mask_env(arg))
        elif pending in _SOURCE_FLAGS:
            shown.append(_mask_source(arg))
        elif pending == "--label" and arg.partition("=")[0] in _SECRET_LABELS:
            shown.append(_mask_env(arg))
        elif arg.startswith("--env="):
            shown.append("--env=" + _mask_env(arg[len("--env="):]))
        else:
            shown.append(arg)
        pending = arg
    return shown


def _mask_env(assignment: str) -> str:
    key, sep, _value = assignment.partition("=")
    return f"{key}={MASK}" if sep else key


def _mask_source(spec: str) -> str:
    _source, sep, rest = spec.partition(":")
    return f"{MASK}:{rest}" if sep else MASK


def shell_words(argv: Sequence[str]) -> str:
    """A readable one-line rendering of an (already redacted) argv."""
    return " ".join(_quote(arg) for arg in argv)


def _quote(arg: str) -> str:
    if arg and re.fullmatch(r"[\w@%+=:,./*-]+", arg):
        return arg
    return "'" + arg.replace("'", "'\\''") + "'"
