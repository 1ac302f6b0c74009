"""Keeping secrets out of every message: env values and mount sources never appear in errors or logs.

msb takes env values on its command line (`-e K=V`) and echoes mount sources in its own errors ("bind host path must
not contain ...: /home/me/secret"), so both the argv we show and the stderr we quote are scrubbed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from devsy.driver.microsandbox.naming import LABEL_CREATED_VOLUMES

MASK = "***"
_ENV_FLAGS = ("-e", "--env")
_SOURCE_FLAGS = ("--mount-dir", "--mount-file", "--mount-named")
# Label values that name mount sources (the volumes devsy created) are masked like the sources themselves.
_SECRET_LABELS = (LABEL_CREATED_VOLUMES,)
# A value this short would mask half of any message if replaced everywhere; it is masked as a whole word instead.
_SHORT = 4


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


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each secret replaced by ***, longest secrets first."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if len(secret) >= _SHORT:
            text = text.replace(secret, MASK)
        else:
            text = re.sub(rf"(?<![\w./-]){re.escape(secret)}(?![\w./-])", MASK, text)
    return text


def shell_words(argv: Sequence[str]) -> str:
    """A readable one-line rendering of an (already redacted) argv."""
    return " ".join(_quote(arg) for arg in argv)


def _quote(arg: str) -> str:
    if arg and re.fullmatch(r"[\w@%+=:,./*-]+", arg):
        return arg
    return "'" + arg.replace("'", "'\\''") + "'"
