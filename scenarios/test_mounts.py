"""mounts: binds, named volumes, tmpfs and the workspace's permission view (Go: provider_microsandbox_mounts.go).

The Go suite runs these on MicroSandbox only; here bind-rw-ro and volume-tmpfs run on every provider (Docker's
behaviour is the reference the microVM must match), and workspace-permissions, a MicroSandbox policy, on it alone.
Guest writes to binds and volumes run as root: a fresh named volume is root-owned, and a root write that fails
proves the read-only mount itself refused it (root passes every permission check).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness import case
from harness.backends import BackendInspector
from harness.case_context import CaseContext
from harness.devsy_handle import DevsyHandle
from harness.providers import Provider
from scenarios.support import assert_running, local_source, only_instance

# What the guest's failed write says, by backend. Docker's bind is a read-only mount (EROFS); the Go suite asserts
# only that msb's write fails (its virtiofs server may refuse with another errno), so no text is required there.
READ_ONLY_ERROR = {"docker": "Read-only file system", "microsandbox": ""}
# A shell redirect that cannot open its file exits 1 (bash) or 2 (dash); devsy's own failures (a lost connection,
# a missing workspace) exit otherwise, so the status alone tells enforcement apart from a broken link.
REDIRECT_FAILED = (1, 2)


def _fstype(devsy: DevsyHandle, workspace_id: str, target: str) -> str:
    """The filesystem type /proc/mounts lists for the mount at `target` (the newest, if stacked)."""
    return devsy.sh(workspace_id, f"awk '$2 == \"{target}\" {{t = $3}} END {{print t}}' /proc/mounts").strip()


@case("mounts/bind-rw-ro")
def test_bind_rw_ro(provider: Provider, case: CaseContext, devsy: DevsyHandle) -> None:
    writable, readonly = case.workdir / "bind-write", case.workdir / "bind-read"
    for folder in (writable, readonly):
        folder.mkdir()
        (folder / "from-host").write_text("host\n")
        (folder / "from-host").chmod(0o600)
    ro_file = readonly / "from-host"
    ro_before = (ro_file.read_bytes(), ro_file.stat().st_mode, ro_file.stat().st_mtime_ns)
    source = local_source(case, mounts=[
        f"type=bind,source={writable},target=/parity-write",
        f"type=bind,source={readonly},target=/parity-read,readonly",
    ])
    wid = case.workspace_id()
    assert_running(devsy.up(source, wid).ws())

    # Host -> guest, for a file written before up and one written after (a live share, not a copy at create).
    (writable / "late-from-host").write_text("late\n")
    out = devsy.sh(wid, "cat /parity-write/from-host /parity-read/from-host /parity-write/late-from-host", user="root")
    assert out == "host\nhost\nlate\n", f"the guest does not see the host's bind content: {out!r}"
    # Guest -> host.
    devsy.sh(wid, "printf 'guest\\n' > /parity-write/from-guest", user="root")
    assert (writable / "from-guest").read_text() == "guest\n", "a guest write to the writable bind missed the host"

    for script in ("printf 'forbidden\\n' > /parity-read/from-host", "printf 'new\\n' > /parity-read/created"):
        refused = devsy.exec(wid, ["/bin/sh", "-c", script], user="root")
        stderr = refused.stderr.decode("utf-8", "replace")
        assert refused.exit_code in REDIRECT_FAILED, (
            f"a root write to the read-only bind was not refused by the guest shell ({script!r}): "
            f"exit {refused.exit_code}, stderr {stderr!r}")
        assert READ_ONLY_ERROR[provider.backend] in stderr, f"not refused as read-only: {stderr!r}"
    # A later read works: the refusals were the mount's, not a lost connection.
    assert devsy.sh(wid, "cat /parity-read/from-host", user="root") == "host\n"
    assert (ro_file.read_bytes(), ro_file.stat().st_mode, ro_file.stat().st_mtime_ns) == ro_before, \
        "the host file behind the read-only bind changed"
    assert not (readonly / "created").exists(), "a file appeared behind the read-only bind"


@case("mounts/volume-tmpfs")
def test_volume_tmpfs(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    wid = case.workspace_id()
    volume = f"{wid}-vol"  # named after the workspace, so the sweeper finds it on every backend
    source = local_source(case, mounts=[
        f"type=volume,source={volume},target=/parity-volume",
        "type=tmpfs,target=/parity-scratch",
    ])
    first = devsy.up(source, wid).ws()
    assert volume in backend.volumes(wid), f"no volume {volume} for {wid}: {backend.volumes(wid)}"
    _expect_scratch_tmpfs(devsy, wid)
    devsy.sh(wid, "printf 'persistent\\n' > /parity-volume/marker && printf 'scratch\\n' > /parity-scratch/marker",
             user="root")

    assert devsy.stop(wid).ws().status == "stopped"
    again = devsy.up(source, wid).ws()
    assert again.reused and again.instance == first.instance, f"stop + up did not reuse the instance: {again}"
    _expect_persistent(devsy, wid, "stop + up")

    devsy.sh(wid, "printf 'scratch-again\\n' > /parity-scratch/marker", user="root")
    assert devsy.stop(wid).ws().status == "stopped"
    assert_running(devsy.start(wid).ws())
    _expect_persistent(devsy, wid, "stop + start")

    devsy.sh(wid, "printf 'scratch-third\\n' > /parity-scratch/marker", user="root")
    recreated = devsy.up(source, wid, recreate=True).ws()
    assert recreated.instance is not None and first.instance is not None
    assert recreated.instance.id != first.instance.id, "--recreate kept the instance (nothing proven)"
    assert only_instance(backend, wid).id == recreated.instance.id
    _expect_persistent(devsy, wid, "--recreate")
    assert volume in backend.volumes(wid), f"--recreate lost the volume {volume}: {backend.volumes(wid)}"


def _expect_scratch_tmpfs(devsy: DevsyHandle, workspace_id: str) -> None:
    fstype = _fstype(devsy, workspace_id, "/parity-scratch")
    assert fstype == "tmpfs", f"/parity-scratch is {fstype!r} in /proc/mounts, expected tmpfs"
    statfs = devsy.sh(workspace_id, "stat -f -c %T /parity-scratch").strip()
    assert statfs == "tmpfs", f"statfs of /parity-scratch says {statfs!r}, expected tmpfs"


def _expect_persistent(devsy: DevsyHandle, workspace_id: str, after: str) -> None:
    _expect_scratch_tmpfs(devsy, workspace_id)
    scratch = devsy.sh(workspace_id, "ls -A /parity-scratch", user="root")
    assert scratch == "", f"tmpfs kept {scratch!r} across {after}"
    kept = devsy.sh(workspace_id, "cat /parity-volume/marker", user="root")
    assert kept == "persistent\n", f"the named volume lost its data across {after}: {kept!r}"


@dataclass(frozen=True)
class StatPolicy:
    """One MICROSANDBOX_WORKSPACE_STAT_VIRTUALIZATION value and what the guest sees with private host permissions."""

    name: str
    shows_host_owner: bool  # off: the host's uid:gid; strict/relaxed: the guest's fallback identity (root here)
    chmod_from_guest: bool  # virtualized policies keep a guest chmod in the guest; off shows the host's chmod


STAT_POLICIES = (
    StatPolicy("strict", shows_host_owner=False, chmod_from_guest=True),
    StatPolicy("relaxed", shows_host_owner=False, chmod_from_guest=True),
    StatPolicy("off", shows_host_owner=True, chmod_from_guest=False),
)
# A host owner no guest identity has (the Go suite's), so a guest that shows it shows the host's metadata.
HOST_OWNER = (10001, 10002)


@case("mounts/workspace-permissions")
def test_workspace_permissions(provider: Provider, case: CaseContext, devsy: DevsyHandle) -> None:
    for policy in STAT_POLICIES:
        _check_stat_policy(case, devsy, policy)


def _check_stat_policy(case: CaseContext, devsy: DevsyHandle, policy: StatPolicy) -> None:
    source = local_source(case, f"src-{policy.name}", containerUser="root", remoteUser="root")
    wid = case.workspace_id(policy.name)
    ws = devsy.up(source, wid, options=("MICROSANDBOX_WORKSPACE_HOST_PERMISSIONS=private",
                                        f"MICROSANDBOX_WORKSPACE_STAT_VIRTUALIZATION={policy.name}")).ws()
    # Created after setup, so no workspace chown done at up can supply the identity the guest shows.
    host_file = source / "policy-file"
    host_file.write_text("host\n")
    if os.geteuid() == 0:
        os.chown(host_file, *HOST_OWNER)
    host_file.chmod(0o644)
    owner = _owner(host_file)
    assert owner != "0:0", "the host file must not be root-owned, or the policies cannot be told apart"
    guest_file = f"{ws.workspace_folder}/policy-file"
    expected_owner = owner if policy.shows_host_owner else "0:0"

    seen = devsy.sh(wid, f"stat -c '%u:%g %a' {guest_file}").strip()
    assert seen == f"{expected_owner} 644", f"{policy.name}: the guest sees {seen!r}"
    if policy.chmod_from_guest:
        devsy.sh(wid, f"chmod 600 {guest_file}")
        mode = host_file.stat().st_mode & 0o777
        assert mode == 0o644, f"{policy.name}: a guest chmod reached the host file (private): {oct(mode)}"
    else:
        host_file.chmod(0o600)
    assert _owner(host_file) == owner, f"{policy.name}: the host owner changed"
    seen = devsy.sh(wid, f"stat -c '%u:%g %a' {guest_file}").strip()
    assert seen == f"{expected_owner} 600", f"{policy.name}: after chmod the guest sees {seen!r}"
    devsy.delete(wid).expect_success()  # one microVM at a time


def _owner(path: Path) -> str:
    stat = path.stat()
    return f"{stat.st_uid}:{stat.st_gid}"
