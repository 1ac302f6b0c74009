"""Finding the `msb` binary and checking that it is a version whose CLI behaviour this driver was verified against.

Order: `MSB_PATH` (explicit override), the binary bundled in the `microsandbox` wheel, `msb` on PATH, then where
msb's own installer (install.microsandbox.dev) puts it, `~/.microsandbox/bin/msb` and `~/.local/bin/msb`, which a
non-login shell often lacks on PATH (the Go driver looks there too). The bundled binary is preferred over the
wheel's `msb` console script: that script starts Python and may resolve to another msb install (persisted paths
under MSB_HOME), so the pinned binary would not be the one that runs.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from devsy.errors import BackendUnavailable

# The CLI texts and flags the driver keys on (error lines, --stream, volume/load behaviour) were checked on 0.7.11.
MIN_MSB_VERSION = (0, 7, 11)
MSB_PATH_ENV = "MSB_PATH"
_VERSION_TIMEOUT_S = 15.0
_VERSION = re.compile(r"\bmsb (\d+)\.(\d+)\.(\d+)\b")
_INSTALL_HINT = "install it with `pip install microsandbox==0.7.11` (the wheel bundles msb and libkrunfw), or set " \
                "MSB_PATH to an msb binary"
_INSTALLER_PLACES = (Path(".microsandbox") / "bin" / "msb", Path(".local") / "bin" / "msb")  # under the home folder


@dataclass(frozen=True)
class MsbBinary:
    path: str
    version: tuple[int, int, int]

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))


def bundled_msb() -> Path | None:
    """The msb inside the installed `microsandbox` wheel, found without importing the package (it loads native code)."""
    spec = importlib.util.find_spec("microsandbox")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "_bundled" / "bin" / "msb"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_msb() -> str:
    """The path of the msb binary to use; BackendUnavailable when there is none."""
    override = os.environ.get(MSB_PATH_ENV, "")
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BackendUnavailable(f"{MSB_PATH_ENV} names {override}, which is not an executable file",
                                     hint=f"point {MSB_PATH_ENV} at an msb binary, or unset it to use the bundled one")
        return override
    bundled = bundled_msb()
    if bundled is not None:
        return str(bundled)
    on_path = shutil.which("msb")
    if on_path:
        return on_path
    installed = installer_places()
    for candidate in installed:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    looked = [f"{MSB_PATH_ENV} (unset)", "the `microsandbox` Python package's bundled msb (not installed)",
              "PATH", *map(str, installed)]
    raise BackendUnavailable(f"the MicroSandbox CLI `msb` was not found; looked in: {'; '.join(looked)}",
                             hint=f"{_INSTALL_HINT}, or run msb's installer (curl -fsSL https://install.microsandbox.dev"
                                  " | sh, which puts it in ~/.microsandbox/bin)")


def installer_places() -> list[Path]:
    """Where msb's own installer leaves msb, under this user's home folder (none if the home is unknown)."""
    try:
        home = Path.home()
    except (KeyError, RuntimeError):  # no HOME and no passwd entry
        return []
    return [home / place for place in _INSTALLER_PLACES]


def locate_msb() -> MsbBinary:
    """Find msb and check its version (cached per binary path and modification time)."""
    path = find_msb()
    return _checked(path, os.stat(path).st_mtime_ns)


@lru_cache(maxsize=8)
def _checked(path: str, _mtime_ns: int) -> MsbBinary:
    try:
        proc = subprocess.run([path, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=_VERSION_TIMEOUT_S, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendUnavailable(f"`{path} --version` did not answer: {exc}", hint=_INSTALL_HINT) from exc
    text = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
    match = _VERSION.search(text)
    if proc.returncode != 0 or match is None:
        shown = text.strip().splitlines()[-1] if text.strip() else f"exit status {proc.returncode}"
        raise BackendUnavailable(f"`{path} --version` did not report an msb version: {shown}", hint=_INSTALL_HINT)
    version = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
    if version < MIN_MSB_VERSION:
        wanted = ".".join(map(str, MIN_MSB_VERSION))
        raise BackendUnavailable(
            f"msb {'.'.join(map(str, version))} at {path} is older than {wanted}, the oldest version devsy supports",
            hint=f"upgrade with `pip install microsandbox=={wanted}`, or point {MSB_PATH_ENV} at msb {wanted} or newer",
        )
    return MsbBinary(path=path, version=version)
