"""The agent's pinned wheels: from devsy's installed package data, else fetched once with `pip download`.

Installing devsy fetches the wheel set of DEFAULT_LOCK for every supported architecture into the package
(`devsy/agent/_wheels/<lock key>/<arch>/`, written by setup.py's `build_agent_wheels` through `fill_package_data`),
so building the agent needs no network. Only when that set is absent (a source tree used without installing it, a
pin changed since the install, another lock such as a provider bundle's) are the wheels downloaded into the cache
(`<cache>/wheels/<lock key>/<arch>/`), saying so on stderr. Both have the same layout and manifest, whose sha256
of every wheel is checked before a set is used. A cache entry appears atomically (downloaded into a temporary
directory, then renamed), under a file lock, so concurrent builders download once and never see half a set.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from devsy.agent.errors import AgentBuildError
from devsy.agent.lock import DEFAULT_LOCK, PLATFORMS, WheelLock
from devsy.arch import SUPPORTED

PIP_TIMEOUT_S = 300.0
LOCK_TIMEOUT_S = 900.0
_MANIFEST = "manifest.json"
# pip resolves several interpreters in parallel; they are network-bound, and the machines have two cores.
_PARALLEL = 3
# Filled when devsy is installed (setup.py); never committed (.gitignore).
PACKAGED_DIR = Path(__file__).with_name("_wheels")


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


def packaged_wheels(arch: str, lock: WheelLock = DEFAULT_LOCK, packaged: Path = PACKAGED_DIR) -> WheelSet | None:
    """The set installed with devsy for `arch` and `lock`, checked against its manifest; None when not installed."""
    target = packaged / lock.key() / arch
    loaded = _load(target)
    if loaded is None:
        return None
    bad = _mismatched(target)
    if bad:
        raise AgentBuildError(f"the agent wheels installed with devsy in {target} do not match their manifest: "
                              f"{', '.join(bad)}",
                              hint="reinstall devsy (`pip install --force-reinstall .`, or `pip install -e .` in a "
                                   "source tree) to fetch them again")
    return loaded


def ensure_wheels(arch: str, lock: WheelLock = DEFAULT_LOCK, root: Path | None = None,
                  packaged: Path = PACKAGED_DIR) -> WheelSet:
    """The wheel set for `arch`: the one installed with devsy, else the cache's, downloaded once per lock key."""
    installed = packaged_wheels(arch, lock, packaged)
    if installed is not None:
        return installed
    base = (root or cache_root()) / "wheels" / lock.key()
    target = base / arch
    existing = _load_verified(target)
    if existing is not None:
        return existing
    base.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(base / f"{arch}.lock"), timeout=LOCK_TIMEOUT_S):
            existing = _load_verified(target)
            if existing is not None:
                return existing
            # The one place devsy reaches a package index at run time: say so, and why.
            why = " (reinstall devsy with pip to get them installed, and no build needs a package index)" \
                if lock == DEFAULT_LOCK else ""  # only the agent's lock is installed (setup.py)
            print(f"devsy: the pinned wheels for {arch} (lock {lock.key()}) are not in devsy's installed package "
                  f"data ({packaged}); downloading them once with pip into {target}{why}", file=sys.stderr, flush=True)
            _download(arch, lock, base, target)
    except Timeout as exc:
        raise AgentBuildError(f"another process held the agent wheel cache lock {base}/{arch}.lock too long",
                              hint="wait for other devsy builds to finish; look for a hung `pip download`") from exc
    loaded = _load_verified(target)
    assert loaded is not None  # just written under the lock
    return loaded


def fill_package_data(dest: Path, lock: WheelLock = DEFAULT_LOCK, archs: Iterable[str] = SUPPORTED,
                      reuse: Path | None = None, log: Callable[[str], None] = print) -> list[Path]:
    """Put the wheel set of `lock` for every arch in `dest/<lock key>/<arch>/` (setup.py's install-time step), and
    return every file written. A complete, verified set already in `dest` or in `reuse` (the source tree's, from an
    editable install) is kept or copied instead of downloaded; sets of other lock keys in `dest` are removed."""
    base = dest / lock.key()
    base.mkdir(parents=True, exist_ok=True)
    for stale in dest.iterdir():
        if stale.is_dir() and stale.name != lock.key():
            shutil.rmtree(stale)  # a previous pin set: nothing reads it any more
    for arch in archs:
        target = base / arch
        if _load_verified(target) is not None:
            log(f"agent wheels for {arch} (lock {lock.key()}): already in {target}")
            continue
        source = (reuse / lock.key() / arch) if reuse is not None else None
        if source is not None and source.resolve() != target.resolve() and _load_verified(source) is not None:
            log(f"agent wheels for {arch} (lock {lock.key()}): copied from {source}")
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target)
        else:
            log(f"agent wheels for {arch} (lock {lock.key()}): downloading with pip into {target}")
            _download(arch, lock, base, target)
        _make_readable(target)
    return sorted(p for p in base.rglob("*") if p.is_file())


def _make_readable(target: Path) -> None:
    """Folders 0755, files 0644: the temporary folder a set is downloaded into is 0700, and devsy may run as
    another user than the one who installed it."""
    for path in [target, *target.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


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


def _mismatched(target: Path) -> list[str]:
    """The wheels of a loaded set whose sha256 differs from the one its manifest recorded at download."""
    recorded: dict[str, str] = json.loads((target / _MANIFEST).read_text()).get("sha256", {})
    loaded = _load(target)
    assert loaded is not None
    names = [*loaded.common, *(n for names in loaded.per_tag.values() for n in names)]
    return [name for name in names if recorded.get(name) != _sha256(target / name)]


def _load_verified(target: Path) -> WheelSet | None:
    """A complete set whose every wheel matches its manifest, else None (a damaged entry is downloaded again)."""
    loaded = _load(target)
    return loaded if loaded is not None and not _mismatched(target) else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
            manifest["sha256"][name] = _sha256(tmp / name)
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
        hint="installing devsy with pip puts these wheels in its package (then no build downloads anything); "
             "without them the first agent build needs a package index (pip download): check the network and "
             "pip's index settings, or set DEVSY_AGENT_BINARY=PATH to an agent built elsewhere with "
             "`python -m devsy.agent.build`",
    )
