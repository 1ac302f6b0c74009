"""Explaining a microVM that never booted: msb's own error, the sandbox's runtime log, and `msb doctor`'s findings.

These are collected before the failed sandbox is removed (its log goes with it) and are summarized into one
BootFailed error. Every text is redacted: runtime logs may mention mount sources.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from devsy.driver.microsandbox.errors import BootFailed
from devsy.driver.microsandbox.msb import MsbClient, error_summary
from devsy.errors import DriverError
from devsy.redaction import redact_text

_DIAGNOSTIC_TIMEOUT_S = 30.0
_LOG_LINES = 4
_NOTABLE = re.compile(r"\b(ERROR|WARN|error|failed|panicked)\b")


def boot_failed(msb: MsbClient, name: str, what: str, msb_stderr: str, secrets: Sequence[str]) -> BootFailed:
    """A BootFailed for sandbox `name` (`what` says which operation, e.g. "the microVM of workspace X")."""
    parts = [f"{what} did not boot: {_msb_error(msb_stderr)}"]
    runtime = _quietly(lambda: _runtime_log(msb, name, secrets))
    if runtime:
        parts.append(f"runtime log: {runtime}")
    doctor = _quietly(lambda: _doctor(msb, secrets))
    if doctor:
        parts.append(f"msb doctor: {doctor}")
    libkrunfw = msb.env.get("MSB_LIBKRUNFW_PATH", "")
    hint = ("check that KVM on this host can boot guests (a /dev/kvm that opens is not enough: nested or software "
            "KVM such as kvm-pvm stops guests with KVM_EXIT_INTERNAL_ERROR), run `msb doctor`, and check that "
            + (f"MSB_LIBKRUNFW_PATH ({libkrunfw}) is the libkrunfw library"
               if libkrunfw else "the libkrunfw bundled with msb is intact (or set MSB_LIBKRUNFW_PATH to one)")
            + "; `python -m devsy.driver.microsandbox.probe` boots a tiny VM to confirm")
    return BootFailed("; ".join(parts), hint=hint)


def _quietly(collect: Callable[[], str]) -> str:
    """A diagnostic that cannot be collected (msb hangs, ...) is left out; it must not hide the boot failure."""
    try:
        return collect()
    except DriverError:
        return ""


def _msb_error(stderr: str) -> str:
    summary = error_summary(stderr)
    # msb points at `msb logs` for details; the sandbox is removed after this, so its log is quoted here instead.
    kept = [part for part in summary.split("; ") if not part.startswith("run `msb logs")]
    return "; ".join(kept) or "msb reported no error text"


def _runtime_log(msb: MsbClient, name: str, secrets: Sequence[str]) -> str:
    result = msb.run(["logs", name, "--source", "system", "--no-color", "--tail", "200"],
                     action="reading the sandbox's runtime log", timeout=_DIAGNOSTIC_TIMEOUT_S, check=False,
                     secrets=secrets)
    if result.returncode != 0:
        return ""
    lines = [line.strip() for line in redact_text(result.text, secrets).splitlines() if _NOTABLE.search(line)]
    return " | ".join(lines[-_LOG_LINES:])


def _doctor(msb: MsbClient, secrets: Sequence[str]) -> str:
    result = msb.run(["doctor"], action="running msb doctor", timeout=_DIAGNOSTIC_TIMEOUT_S, check=False,
                     secrets=secrets)
    text = result.stderr + "\n" + redact_text(result.text, secrets)
    failed = [" ".join(line.split()) for line in text.splitlines() if line.strip().startswith("✗")]
    errors = [line.strip()[len("error:"):].strip() for line in text.splitlines() if line.strip().startswith("error:")]
    return "; ".join([*failed, *errors])
