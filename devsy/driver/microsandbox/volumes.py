"""Named volumes: created before the sandbox that mounts them, and removed only when devsy created them.

msb volumes carry no labels, so ownership is recorded on the sandbox (`dev.devsy.created-volumes`) and in the
caller's list while a run is in progress; a volume that already existed is mounted and never removed by devsy.
"""

from __future__ import annotations

from devsy.driver.microsandbox.msb import MsbClient
from devsy.redaction import MASK

VOLUME_TIMEOUT_S = 60.0


def ensure_volumes(msb: MsbClient, names: list[str], created: list[str]) -> None:
    """Create each missing volume, appending it to `created` the moment it exists (so a failure can undo it)."""
    for name in names:
        # Volume names may be secrets (like mount sources): messages name the mount's target elsewhere, not this.
        result = msb.run(["volume", "create", name], action="creating a named volume", timeout=VOLUME_TIMEOUT_S,
                         secrets=[name], check=False)
        if result.returncode == 0:
            created.append(name)
        elif not _says(result.stderr, "volume already exists"):
            raise msb.failure(["volume", "create", MASK], result, action="creating a named volume")


def remove_volumes(msb: MsbClient, names: list[str]) -> list[str]:
    """Remove each volume (an absent one counts as removed); return one line per volume that could not be."""
    problems: list[str] = []
    for name in names:
        try:
            result = msb.run(["volume", "rm", name], action="removing a named volume", timeout=VOLUME_TIMEOUT_S,
                             secrets=[name], check=False)
        except Exception as exc:  # noqa: BLE001 - each volume is independent; the others must still be tried
            problems.append(f"a named volume: {exc}")
            continue
        if result.returncode != 0 and not _says(result.stderr, "volume not found"):
            problems.append(f"a named volume: {msb.failure(['volume', 'rm', MASK], result, action='removing it')}")
    return problems


def _says(stderr: str, what: str) -> bool:
    # One volume per command, so msb's report is about it; the name itself was masked in `stderr` already.
    return any(line.strip().startswith(f"error: {what}: ") for line in stderr.splitlines())
