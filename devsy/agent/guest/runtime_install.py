"""A workspace's runtime binaries on the remote machine: downloaded once into the agent's private cache, then copied
into the workspace's own folder, which every later start uses as is.

Layout under the agent's home (`~/.devsy-agent` unless the provider config says otherwise):
    downloads/                  the private download cache (download.py): verified files named by sha256
    workspaces/<id>/bin/<NAME>  the workspace's copies, mode 0755
    locks/                      <id>.lock serializes installs for one workspace (outside its folder, which delete
                                removes); <sha256>.lock one download (outside the cache, which may be wiped)

A workspace copy is checked (regular file, mode 0755, sha256) every time before it is used. A good copy is never
touched (same inode), so once it exists neither the cache nor the URL is needed: the cache may be wiped and the URL
may answer 404. A missing or altered copy is installed again from the cache, downloading only when the cache lacks
the file: copied to a temporary name in the workspace folder, verified, made 0755, renamed into place. The workspace
folder is created only after the download verified, so a refused download leaves nothing behind.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
from dataclasses import dataclass

from .download import (
    DEFAULT_POLICY,
    ChecksumMismatch,
    DownloadError,
    Policy,
    Source,
    fetch,
    sha256_of,
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_WORKSPACE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
MODE = 0o755


class RequestError(DownloadError):
    """The host asked for something this machine cannot do (no binary for its platform, a bad name)."""

    kind = "runtime-unsupported"


@dataclass(frozen=True)
class Installed:
    name: str
    path: str
    sha256: str
    downloaded: bool  # this call fetched it from its URL
    copied: bool  # this call (re)placed the workspace copy


def agent_home(raw: str) -> str:
    return os.path.abspath(os.path.expanduser(raw or "~/.devsy-agent"))


def platform() -> tuple:
    """(os, arch) in the provider config's terms: ("linux", "amd64")."""
    try:  # in the agent zipapp, devsy.agent.build ships devsy/arch.py as devsy_agent/arch.py
        from .arch import normalize_arch
    except ImportError:  # on the host (tests import this file as devsy.agent.guest.runtime_install)
        from devsy.arch import normalize_arch
    return os.uname().sysname.lower(), normalize_arch(os.uname().machine)


def select(binaries: dict, os_name: str, arch: str) -> list:
    """The Source of each declared binary for this platform; a binary without one is a RequestError."""
    chosen = []
    for name in sorted(binaries):
        if not _NAME.match(name):
            raise RequestError(f"binary name {name!r} is not usable as a file name",
                               hint="use letters, digits, '_', '.' and '-' in binary names")
        entries = [e for e in binaries[name] if e.get("os") == os_name and e.get("arch") == arch]
        if not entries:
            offered = ", ".join(sorted(f"{e.get('os')}/{e.get('arch')}" for e in binaries[name])) or "nothing"
            raise RequestError(f"the provider config has no {name} for {os_name}/{arch} (it declares: {offered})",
                               hint=f"add a {name} entry for {os_name}/{arch} to the provider config")
        chosen.append(Source(name=name, url=str(entries[0]["url"]), sha256=str(entries[0]["sha256"])))
    return chosen


def workspace_dir(home: str, workspace_id: str) -> str:
    if not _WORKSPACE.match(workspace_id):
        raise RequestError(f"workspace id {workspace_id!r} is not valid", hint="use a devsy workspace id")
    return os.path.join(home, "workspaces", workspace_id)


def ensure(home: str, workspace_id: str, sources: list, policy: Policy = DEFAULT_POLICY) -> list:
    """Make every binary usable in the workspace's folder; returns one Installed per source."""
    folder = workspace_dir(home, workspace_id)
    os.makedirs(os.path.join(home, "locks"), mode=0o700, exist_ok=True)
    with open(os.path.join(home, "locks", workspace_id + ".lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        return [_ensure_one(home, folder, source, policy) for source in sources]


def _ensure_one(home: str, folder: str, source: Source, policy: Policy) -> Installed:
    target = os.path.join(folder, "bin", source.name)
    if _good_copy(target, source.sha256):
        return Installed(source.name, target, source.sha256, downloaded=False, copied=False)
    cached, downloaded = fetch(source, os.path.join(home, "downloads"), policy, lock_dir=os.path.join(home, "locks"))
    os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
    tmp = f"{target}.tmp-{os.getpid()}"
    try:
        shutil.copyfile(cached, tmp)
        actual = sha256_of(tmp)  # the copy itself, not the cache, is what will run
        if actual != source.sha256:
            raise ChecksumMismatch(source.name, cached, source.sha256, actual)
        os.chmod(tmp, MODE)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return Installed(source.name, target, source.sha256, downloaded=downloaded, copied=True)


def _good_copy(path: str, sha256: str) -> bool:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) != MODE:
        return False
    return sha256_of(path) == sha256


def remove_workspace(home: str, workspace_id: str) -> bool:
    """Remove the workspace's folder on this machine (and its lock file); False when the folder did not exist."""
    folder = workspace_dir(home, workspace_id)
    lock_path = os.path.join(home, "locks", workspace_id + ".lock")
    if not os.path.exists(lock_path):
        return _remove_tree(folder)
    with open(lock_path, "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # not while a start of this workspace is installing
        removed = _remove_tree(folder)
        os.unlink(lock_path)
    return removed


def _remove_tree(folder: str) -> bool:
    if not os.path.isdir(folder):
        return False
    shutil.rmtree(folder)
    return True
