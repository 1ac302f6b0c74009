"""The boot probe's rootfs: a directory holding Debian's statically linked busybox, built once and cached.

Small (about 2 MB) and independent of Docker, so the probe measures the microVM and not an image pipeline. It is
built in a temporary directory next to the cache entry and renamed into place, so an interrupted build never leaves
a half tree behind; a file lock keeps parallel workers from building it twice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from filelock import FileLock, Timeout

from devsy.driver.microsandbox.process import stop_group
from devsy.errors import DevsyError

ROOTFS_FORMAT = 1  # bump when the tree's layout changes
PACKAGE = "busybox-static"
_APT_TIMEOUT_S = 300.0
_LOCK_TIMEOUT_S = 2 * _APT_TIMEOUT_S + 60
_APPLETS = ("sh", "echo", "true", "cat", "ls", "sleep")


class ProbeRootfsError(DevsyError):
    kind = "probe-rootfs"


def probe_rootfs_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "devsy" / "msb-probe" / f"v{ROOTFS_FORMAT}" / "rootfs"


def ensure_probe_rootfs() -> Path:
    """The cached busybox rootfs, built now if missing (needs apt-get and dpkg-deb, as on Debian and Ubuntu)."""
    target = probe_rootfs_path()
    if (target / "bin" / "busybox").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(target.parent / ".lock"), timeout=_LOCK_TIMEOUT_S):
            if not (target / "bin" / "busybox").is_file():
                _build(target)
    except Timeout as exc:
        raise ProbeRootfsError(f"another build of the probe rootfs held {target.parent}/.lock too long",
                               hint="check for a hung apt-get, or delete the lock file") from exc
    return target


def _build(target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as work:
        deb = _download(Path(work))
        _run(["dpkg-deb", "-x", str(deb), str(Path(work) / "pkg")], "dpkg-deb -x")
        tree = Path(work) / "rootfs"
        for folder in ("bin", "dev", "proc", "sys", "tmp", "etc", "root", "run"):
            (tree / folder).mkdir(parents=True)
        shutil.copy2(Path(work) / "pkg" / "bin" / "busybox", tree / "bin" / "busybox")
        for applet in _APPLETS:
            (tree / "bin" / applet).symlink_to("busybox")
        (tree / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        (tree / "etc" / "group").write_text("root:x:0:\n")
        shutil.rmtree(target, ignore_errors=True)  # a tree without busybox is a leftover, never a valid cache
        os.replace(tree, target)


def _download(work: Path) -> Path:
    try:
        _run(["apt-get", "download", PACKAGE], "apt-get download", cwd=work)
    except ProbeRootfsError:
        if os.geteuid() != 0:
            raise
        # Package lists may be missing or stale on a fresh machine: refresh them once, then try again.
        _run(["apt-get", "update"], "apt-get update")
        _run(["apt-get", "download", PACKAGE], "apt-get download", cwd=work)
    found = sorted(work.glob(f"{PACKAGE}_*.deb"))
    if not found:
        raise ProbeRootfsError(f"apt-get download {PACKAGE} left no .deb file", hint="check the apt sources")
    return found[0]


def _run(argv: list[str], what: str, cwd: Path | None = None) -> None:
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    except OSError as exc:
        raise ProbeRootfsError(f"{what} could not start: {exc}",
                               hint="the probe rootfs needs apt-get and dpkg-deb (Debian or Ubuntu)") from exc
    try:
        output, _ = proc.communicate(timeout=_APT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stop_group(proc)  # apt-get's download methods run in its group: none is left behind
        raise ProbeRootfsError(f"{what} did not finish within {_APT_TIMEOUT_S:.0f} s",
                               hint="check that Debian's package mirror is reachable") from None
    except BaseException:
        stop_group(proc)
        raise
    if proc.returncode != 0:
        last = output.decode(errors="replace").strip().splitlines()[-3:]
        raise ProbeRootfsError(f"{what} failed (exit status {proc.returncode}): {' | '.join(last)}",
                               hint=f"check that Debian's package mirror is reachable and has {PACKAGE}")
