"""lifecycle/ownership checks: who owns what in the workspace folder, and who runs the workload and the commands.

The guest's view of a host entry's owner is each backend's contract, a row of BACKEND_OWNERSHIP (never a silent
n.a.): MicroSandbox maps the workspace folder to the developer, Docker shows host uids verbatim. The workload's user
and the commands' user are observed from outside devsy, with the backend's own exec (`docker exec`, `msb exec`).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from fixtures.process_observer import ProcessObserver
from harness.backends import BackendInspector
from harness.devsy_handle import DevsyHandle
from scenarios.live_command import LiveCommand

# A host owner no guest user has, so "the guest shows the host's uid" is told apart from "the guest shows the
# developer" (as the Go suite does when CI runs as root). Only root can give a file away; others keep their own.
FOREIGN_OWNER = (10001, 10002)
GUEST_MODES = {"file": 0o644, "dir": 0o755}  # what umask 022 gives, and what the host must show


@dataclass(frozen=True)
class OwnershipContract:
    """How one backend presents workspace ownership; `reason` is what the case text and a failure message say."""

    guest_sees_developer: bool  # else the guest sees the host's uid:gid
    host_shows_guest_owner: bool  # a guest-created entry is owned on the host by the developer's uid:gid
    reason: str


BACKEND_OWNERSHIP: dict[str, OwnershipContract] = {
    "docker": OwnershipContract(
        guest_sees_developer=False, host_shows_guest_owner=True,
        reason="a Docker bind mount shows host uid:gid verbatim both ways; devsy does not implement "
               "updateRemoteUserUID yet, so nothing remaps the developer to the host owner"),
    "microsandbox": OwnershipContract(
        guest_sees_developer=True, host_shows_guest_owner=False,
        reason="msb maps the workspace folder to the developer (uid=,gid= on the mount); the host side of that "
               "folder keeps msb's own ownership, so the host owner of a guest-created entry is not part of the "
               "contract"),
}


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int

    def __str__(self) -> str:
        return f"{self.uid}:{self.gid}"


def host_identity(path: Path) -> Identity:
    stat = path.lstat()
    return Identity(stat.st_uid, stat.st_gid)


def guest_identity(devsy: DevsyHandle, wid: str) -> Identity:
    """The developer's uid:gid, as `devsy exec` (the developer's session) reports it."""
    uid, gid = devsy.sh(wid, 'printf "%s %s" "$(id -u)" "$(id -g)"').split()
    return Identity(int(uid), int(gid))


def check_host_entries(devsy: DevsyHandle, wid: str, source: Path, folder: str, phase: str, backend: str) -> None:
    """Entries the host creates now (after setup: no setup chown can have touched them) show in the guest with their
    mode and the backend's owner; the guest's look leaves the host owner unchanged."""
    contract = BACKEND_OWNERSHIP[backend]
    developer = guest_identity(devsy, wid)
    for kind, mode in GUEST_MODES.items():
        entry = source / f"{phase}-host-{kind}"
        if kind == "file":
            entry.write_text("host\n")
        else:
            entry.mkdir()
        os.chmod(entry, mode)  # normalize the host umask
        if os.geteuid() == 0:
            os.chown(entry, *FOREIGN_OWNER)
        owner = host_identity(entry)
        expected = developer if contract.guest_sees_developer else owner
        seen = devsy.sh(wid, f"stat -c '%u:%g %a' {folder}/{entry.name}").strip()
        assert seen == f"{expected} {mode:o}", (
            f"{phase}: host {kind} {entry.name} ({owner} {mode:o}) shows in the guest as {seen!r}, expected "
            f"'{expected} {mode:o}' on {backend}: {contract.reason}")
        assert host_identity(entry) == owner, f"{phase}: the guest's look changed the host owner of {entry.name}"
        assert (entry.stat().st_mode & 0o7777) == mode, f"{phase}: the host mode of {entry.name} changed"


def check_guest_entries(devsy: DevsyHandle, wid: str, source: Path, folder: str, phase: str, backend: str) -> None:
    """The developer can write the workspace; what it creates (umask 022) shows 0644/0755 on the host."""
    contract = BACKEND_OWNERSHIP[backend]
    developer = guest_identity(devsy, wid)
    names = {kind: f"{phase}-guest-{kind}" for kind in GUEST_MODES}
    created = devsy.exec(wid, ["/bin/sh", "-c", f"umask 022; : > {folder}/{names['file']} && "
                                                 f"mkdir {folder}/{names['dir']}"])
    assert created.exit_code == 0, (
        f"{phase}: the developer ({developer}) cannot write the workspace {folder} (host owner "
        f"{host_identity(source)}, mode {source.stat().st_mode & 0o777:o}): {created.stderr!r}")
    for kind, mode in GUEST_MODES.items():
        entry = source / names[kind]
        assert (entry.stat().st_mode & 0o7777) == mode, (
            f"{phase}: guest-created {kind} {entry.name} has host mode {entry.stat().st_mode & 0o7777:o}, "
            f"expected {mode:o}")
        if contract.host_shows_guest_owner:
            assert host_identity(entry) == developer, (
                f"{phase}: guest-created {kind} {entry.name} is owned by {host_identity(entry)} on the host, "
                f"expected the developer's {developer} on {backend}: {contract.reason}")


def backend_sh(backend: BackendInspector, wid: str, script: str) -> str:
    """A script run by the backend itself (not devsy), as the instance's default user; fails on a non-zero exit."""
    result = backend.exec(wid, ["/bin/sh", "-c", script])
    assert result.exit_code == 0, f"{backend.backend} exec of {script!r} exited {result.exit_code}: {result.stderr}"
    return result.stdout


def check_workload_user(backend: BackendInspector, wid: str, workload_user: str, phase: str) -> None:
    """PID 1 (the keep-alive) and the backend's default exec run as the workload's own user."""
    uid, pid1, default = backend_sh(
        backend, wid, f'id -u {workload_user}; stat -c %u /proc/1; id -u').split()
    assert pid1 == uid, f"{phase}: PID 1 runs as uid {pid1}, expected the workload user {workload_user} ({uid})"
    assert default == uid, f"{phase}: the backend's default exec runs as uid {default}, expected {workload_user}"


def check_command_users(devsy: DevsyHandle, backend: BackendInspector, wid: str, developer: str, phase: str) -> None:
    """`devsy ssh --command` and `devsy exec` run as the developer: each reports it, and the backend's own exec sees
    the live process (pid + nonce in argv) owned by the developer's uid."""
    uid = backend_sh(backend, wid, f"id -u {developer}").strip()
    observer = ProcessObserver(lambda argv: _backend_run(backend, wid, argv))
    for how in (("ssh", wid, "--command"), ("exec", wid, "--", "/bin/sh", "-c")):
        nonce = f"nonce-{uuid.uuid4().hex}"
        # The nonce rides in argv: a non-root observer cannot read another user's environ.
        script = f': {nonce}; echo "$(id -un) $$"; read _line'
        with LiveCommand(devsy, *how, script, stdin=subprocess.PIPE) as live:
            name, pid = live.read_line().decode("utf-8", "replace").split()
            observed = observer.identify(int(pid), nonce)
            owner = backend_sh(backend, wid, f"stat -c %u /proc/{observed.pid}").strip()
            live.write_stdin(b"done\n", close=True)
            finished = live.finish()
        assert finished.exit_code == 0, f"{phase}: devsy {how[0]} exited {finished.exit_code}: {finished.stderr!r}"
        assert name == developer, f"{phase}: devsy {how[0]} runs as {name}, expected the developer {developer}"
        assert owner == uid, f"{phase}: the backend sees devsy {how[0]}'s process as uid {owner}, expected {uid}"


def _backend_run(backend: BackendInspector, wid: str, argv: list[str]) -> tuple[int, bytes]:
    result = backend.exec(wid, argv)
    return result.exit_code, result.stdout.encode()
