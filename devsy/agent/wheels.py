"""Fetching the agent's wheels with `pip download`, cached under a directory named by the lock's key.

The cache entry appears atomically (downloaded into a temporary directory, then renamed), under a file lock, so
concurrent builders download once and never see half a set.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from devsy.agent.errors import AgentBuildError
from devsy.agent.lock import DEFAULT_LOCK, PLATFORMS, WheelLock

PIP_TIMEOUT_S = 300.0
LOCK_TIMEOUT_S = 900.0
_MANIFEST = "manifest.json"
# pip resolves several interpreters in parallel; they are network-bound, and the machines have two cores.
_PARALLEL = 3


@dataclass(frozen=True)
class WheelSet:
    """Downloaded wheels: `common` for every interpreter, `per_tag[tag]` for one (e.g. cffi for cp311)."""

    root: Path
    common: tuple[str, ...]
    per_tag: dict[str, tuple[str, ...]]

    def path(self, relative: str) -> Path:
        return self.root / relative


def cache_root() -> Path:
    """devsy's host cache: `$DEVSY_CACHE_DIR`, else `$XDG_CACHE_HOME/devsy`, else `~/.cache/devsy`."""
    explicit = os.environ.get("DEVSY_CACHE_DIR", "")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "devsy"


def ensure_wheels(arch: str, lock: WheelLock = DEFAULT_LOCK, root: Path | None = None) -> WheelSet:
    """The wheel set for `arch`, downloading it once per lock key."""
    base = (root or cache_root()) / "wheels" / lock.key()
    target = base / arch
    existing = _load(target)
    if existing is not None:
        return existing
    base.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(base / f"{arch}.lock"), timeout=LOCK_TIMEOUT_S):
            existing = _load(target)
            if existing is not None:
                return existing
            _download(arch, lock, base, target)
    except Timeout as exc:
        raise AgentBuildError(f"another process held the agent wheel cache lock {base}/{arch}.lock too long",
                              hint="wait for other devsy builds to finish; look for a hung `pip download`") from exc
    loaded = _load(target)
    assert loaded is not None  # just written under the lock
    return loaded


def _load(target: Path) -> WheelSet | None:
    try:
        data = json.loads((target / _MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    names = [*data["common"], *(n for names in data["per_tag"].values() for n in names)]
    if not all((target / name).is_file() for name in names):
        return None
    return WheelSet(root=target, common=tuple(data["common"]),
                    per_tag={tag: tuple(names) for tag, names in data["per_tag"].items()})


def _download(arch: str, lock: WheelLock, base: Path, target: Path) -> None:
    tmp = Path(tempfile.mkdtemp(dir=base, prefix=f".{arch}-"))
    try:
        jobs = [("common", lock.base_python, lock.common)]
        jobs += [(tag, version, lock.per_python) for tag, version in lock.pythons]
        with ThreadPoolExecutor(max_workers=_PARALLEL) as pool:
            results = list(pool.map(lambda job: _pip_download(arch, tmp, *job), jobs))
        manifest = {"common": results[0], "per_tag": {tag: names for (tag, _, _), names in zip(jobs[1:], results[1:])},
                    "sha256": {}}
        for name in [*manifest["common"], *(n for names in manifest["per_tag"].values() for n in names)]:
            manifest["sha256"][name] = hashlib.sha256((tmp / name).read_bytes()).hexdigest()
        (tmp / _MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        if target.exists():
            shutil.rmtree(target)  # an incomplete entry from an interrupted download
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _pip_download(arch: str, tmp: Path, group: str, python: str, requirements: tuple[str, ...]) -> list[str]:
    dest = tmp / group
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
            "--implementation", "cp", "--python-version", python, "--dest", str(dest)]
    for platform in PLATFORMS[arch]:
        argv += ["--platform", platform]
    argv += list(requirements)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise _pip_failed(arch, python, f"pip did not finish within {PIP_TIMEOUT_S:.0f}s") from exc
    if proc.returncode != 0:
        raise _pip_failed(arch, python, "\n".join(proc.stderr.strip().splitlines()[-8:]))
    names = sorted(p.name for p in dest.glob("*.whl"))
    if len(names) != len(requirements):
        raise _pip_failed(arch, python, f"expected {len(requirements)} wheels, pip saved {names}")
    return [f"{group}/{name}" for name in names]


def _pip_failed(arch: str, python: str, detail: str) -> AgentBuildError:
    return AgentBuildError(
        f"downloading the agent's wheels for {arch}, Python {python} failed:\n{detail}",
        hint="the first agent build needs PyPI (pip download); check the network and pip's index settings, "
             "or set DEVSY_AGENT_BINARY=PATH to an agent built elsewhere with `python -m devsy.agent.build`",
    )
