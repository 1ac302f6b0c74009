"""Can this host boot a MicroSandbox microVM? Answered by booting one, never by looking for /dev/kvm.

A /dev/kvm that opens is not enough (a nested or software KVM such as kvm-pvm stops every guest), so the probe runs
a command in a tiny busybox rootfs within a bounded time and removes the probe sandbox afterwards under a budget of
its own. The result keeps its evidence: the command, msb's exit status, and the tail of what msb and the VM said.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from devsy.driver.microsandbox.diagnostics import boot_failed
from devsy.driver.microsandbox.locate import locate_msb
from devsy.driver.microsandbox.msb import MsbClient, sandbox_missing, tail
from devsy.errors import DevsyError

MARKER = "devsy-probe-ok"
TEARDOWN_TIMEOUT_S = 60.0
_TAIL_LINES = 20


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    command: str
    exit_status: int | None  # None: msb did not finish (timeout) or never ran
    output_tail: str
    duration: float  # seconds, for the whole probe including teardown


def probe_boot(timeout: float = 120.0, *, rootfs: Path | None = None) -> ProbeResult:
    """Boot a tiny rootfs with the msb devsy would use (MSB_PATH / bundled), run one command, remove the sandbox."""
    started = time.monotonic()

    def finish(ok: bool, command: str, status: int | None, output: str) -> ProbeResult:
        return ProbeResult(ok, command, status, tail(output, _TAIL_LINES), round(time.monotonic() - started, 3))

    try:
        client = MsbClient(locate_msb())
    except DevsyError as exc:
        return finish(False, "msb --version", None, str(exc))
    version = f"msb {client.binary.version_text} at {client.binary.path}"
    try:
        if rootfs is None:
            from devsy.driver.microsandbox.probe_rootfs import ensure_probe_rootfs  # noqa: PLC0415

            rootfs = ensure_probe_rootfs()
    except DevsyError as exc:
        return finish(False, "prepare the probe rootfs", None, f"{version}\n{exc}")
    name = f"devsy-probe-{secrets.token_hex(6)}"
    args = ["run", "--name", name, "--pull", "never", str(rootfs), "--", "/bin/sh", "-c", f"echo {MARKER}"]
    try:
        ok, status, output = _boot(client, name, args, max(1.0, timeout - (time.monotonic() - started)))
    finally:
        leftover = _teardown(client, name)
    return finish(ok, client.describe(args), status, f"{version}\n{output}{leftover}")


def _boot(client: MsbClient, name: str, args: list[str], budget: float) -> tuple[bool, int | None, str]:
    try:
        ran = client.run(args, action="booting the probe sandbox", timeout=budget, check=False)
    except DevsyError as exc:  # a timeout: the VM neither answered nor failed within the budget
        return False, None, str(exc)
    output = ran.text + ran.stderr
    if ran.returncode == 0 and MARKER in ran.text:
        return True, 0, output
    # Collected before teardown: the sandbox's runtime log is removed with it.
    explanation = boot_failed(client, name, "the probe microVM", ran.stderr, [])
    return False, ran.returncode, f"{output}\n{explanation.message}\nhint: {explanation.hint}"


def _teardown(client: MsbClient, name: str) -> str:
    """Remove the probe sandbox under its own budget; returns a line of evidence when that failed."""
    try:
        removed = client.run(["rm", "--force", name], action="removing the probe sandbox",
                             timeout=TEARDOWN_TIMEOUT_S, check=False)
    except DevsyError as exc:
        return f"\nteardown failed: {exc.message}"
    if removed.returncode == 0 or sandbox_missing(removed.stderr, name):
        return ""
    return f"\nteardown failed: {removed.stderr.strip()} (remove it with `msb rm --force {name}`)"


def main(argv: list[str] | None = None) -> int:
    """`python -m devsy.driver.microsandbox.probe`: print the result as JSON; exit 0 when a microVM booted."""
    parser = argparse.ArgumentParser(prog="python -m devsy.driver.microsandbox.probe",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds the boot may take (default 120)")
    parser.add_argument("--rootfs", type=Path, help="boot this rootfs directory instead of the cached busybox one")
    args = parser.parse_args(argv)
    result = probe_boot(args.timeout, rootfs=args.rootfs)
    print(json.dumps(asdict(result), indent=2))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
