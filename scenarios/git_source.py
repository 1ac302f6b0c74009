"""failure-cleanup/source-retry's rig: a `git:` source served by an owned loopback git server (fixtures/git_server.py)
whose pack can be cut mid-transfer, and the checks that an interrupted clone left nothing of its attempt behind."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from devsy.bounded_wait import WaitTimeout, poll_until
from fixtures.git_server import GitServer, make_bare_repo
from harness.case_context import CaseContext
from harness.devsy_handle import DevsyHandle
from harness.outcome import Outcome, parse_outcome
from scenarios.live_command import LiveCommand
from scenarios.support import GUEST_IMAGE, live_up_args, managed_content_dir

# 1 MiB of random bytes: the pack cannot shrink below it, so a stall at 64 KiB is mid-pack.
BLOB = "blob.bin"
STALL_AFTER = 64 * 1024
SERVER_STOP_S = 10.0
STALL_WAIT_S = 120.0
GIT_GONE_S = 15.0


@dataclass(frozen=True)
class GitRig:
    server: GitServer
    source: str  # the `git:` argument of devsy up
    files: dict[str, bytes]  # the repository's tree at HEAD

    @property
    def url(self) -> str:
        return self.source.removeprefix("git:")


def git_rig(case: CaseContext, workspace_id: str) -> GitRig:
    """A bare repository with an image-only devcontainer.json (and a named volume, so a lost instance would show),
    served on 127.0.0.1; the server's stop is registered before it starts."""
    config = {"image": GUEST_IMAGE, "remoteUser": "dev",
              "mounts": [f"type=volume,source={workspace_id}-data,target=/data"]}
    files = {
        ".devcontainer/devcontainer.json": (json.dumps(config, indent=2) + "\n").encode(),
        "README.md": f"harness git source for {case.result_id}\n".encode(),
        BLOB: os.urandom(1 << 20),
    }
    root = case.workdir / "git-root"
    root.mkdir()
    make_bare_repo(root / "project.git", files, case.workdir / "git-work")
    server = GitServer(root)
    case.cleanup.add("stop the fixture git server", lambda: server.stop(SERVER_STOP_S))
    server.start()
    return GitRig(server, f"git:{server.url('project.git')}", files)


def partials(devsy: DevsyHandle, workspace_id: str) -> list[Path]:
    """In-progress clone folders of this workspace (siblings of its content folder)."""
    content = managed_content_dir(devsy, workspace_id)
    return sorted(content.parent.glob(f".{content.name}.partial-*")) if content.parent.is_dir() else []


def interrupted_up(devsy: DevsyHandle, rig: GitRig, workspace_id: str, interrupt: Callable[[LiveCommand], None],
                   *, recreate: bool = False) -> Outcome:
    """`devsy up` of the git source whose pack stalls mid-transfer; once the clone holds a partial pack (the server
    says so and devsy's partial folder exists), `interrupt` ends it. Returns devsy's outcome."""
    rig.server.stall_next_pack(STALL_AFTER)
    with LiveCommand(devsy, *live_up_args(devsy, rig.source, workspace_id, recreate=recreate)) as live:
        reached = rig.server.stalled.wait(devsy.deadline.timeout("the clone reaching the stall", STALL_WAIT_S))
        assert reached, f"the clone never reached the stalled pack; {live.describe()}; errors: {rig.server.errors}"
        assert partials(devsy, workspace_id), "the clone is mid-pack but devsy has no partial clone folder"
        interrupt(live)
        done = live.finish()
    return parse_outcome(done.stdout, done.exit_code, devsy.log.records[-1])


def server_dies(rig: GitRig) -> Callable[[LiveCommand], None]:
    return lambda live: rig.server.abort()


def ctrl_c(live: LiveCommand) -> None:
    live.send_signal(signal.SIGINT, group=True)  # a terminal's Ctrl-C reaches devsy's whole process group


def assert_no_git_left(rig: GitRig) -> None:
    """No process still talks to the fixture repository (devsy kills its clone's process group)."""

    def cloning() -> list[str]:
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            cmdline = " ".join(proc.info["cmdline"] or [])
            if rig.url in cmdline and "git" in cmdline:
                found.append(f"{proc.info['pid']}: {cmdline}")
        return found

    try:  # polling external state (other processes) under a bound
        poll_until(cloning, lambda left: not left, timeout=GIT_GONE_S, interval=0.2, what="the clone's git to end")
    except WaitTimeout as exc:
        raise AssertionError(f"git processes of the interrupted clone still run {GIT_GONE_S:g}s on: {exc.last}")


def content_matches(folder: Path, files: dict[str, bytes]) -> None:
    """The content folder is a clone of the repository's HEAD (every file, byte for byte; only .git besides)."""
    tree = {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.rglob("*") if p.is_file() and ".git" not in p.relative_to(folder).parts}
    want = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    assert tree == want, f"the content folder {folder} is not the repository's tree: {sorted(tree)} vs {sorted(want)}"
