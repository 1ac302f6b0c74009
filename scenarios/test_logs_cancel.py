"""logs-cancel: `devsy logs` returns what the workload printed, running or stopped; a cancelled `devsy ssh` (or
`devsy exec`) kills the guest command's process tree, not the instance (CATALOGUE.md).

The workload is the image's own command (`overrideCommand: false`, a Dockerfile CMD), so its output is the
instance's main output on every backend. Process death is proven by an independent observer (fixtures/): pid +
start time + a nonce the process carries, read through a path that is not the command under test (`docker exec`
on Docker, a separate `devsy exec` elsewhere), never by the absence of output.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from devsy.bounded_wait import poll_until
from fixtures.process_observer import ObservedProcess, ProcessObserver
from harness import case
from harness.backends import BackendInspector
from harness.case_context import CaseContext
from harness.devsy_handle import DevsyHandle
from harness.providers import Provider
from scenarios.live_command import LiveCommand
from scenarios.support import (
    GUEST_IMAGE,
    FigureSink,
    local_source,
    no_python_images,
    only_instance,
    tree_digest,
    write_config,
)

CANCEL_BOUND_S = 10.0
LOGS_WAIT_S = 30.0
# The instance's boot identity: the kernel's boot id and PID 1's start time (a restarted container or a rebooted VM
# changes the second; a rebooted VM the first).
_BOOT_IDENTITY = "cat /proc/sys/kernel/random/boot_id; stat=$(cat /proc/1/stat); set -- ${stat##*) }; echo ${20}"


# -- logs ------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Markers:
    """What the workload prints, each framed by newlines: on start (stdout and stderr) and on SIGTERM."""

    nonce: str

    @property
    def started(self) -> bytes:
        return f"\nWORKLOAD-{self.nonce}-STARTED\n".encode()

    @property
    def on_stderr(self) -> bytes:
        return f"\nWORKLOAD-{self.nonce}-STDERR\n".encode()

    @property
    def stopping(self) -> bytes:
        return f"\nWORKLOAD-{self.nonce}-STOPPING\n".encode()

    @property
    def secret(self) -> str:
        return f"WORKLOAD-{self.nonce}-SECRET"


def _workload_source(case: CaseContext, markers: Markers, wid: str) -> Path:
    """A devcontainer whose image's own command prints the markers, then waits; on SIGTERM it prints one more."""
    source = local_source(case)
    script = (
        f"trap 'printf \"\\nWORKLOAD-{markers.nonce}-STOPPING\\n\"; exit 0' TERM; "
        f"printf '\\nWORKLOAD-{markers.nonce}-STARTED\\n'; "
        f"printf '\\nWORKLOAD-{markers.nonce}-STDERR\\n' >&2; "
        f"printf '\\n{markers.secret}\\n'; "
        "while sleep 1000 & wait $!; do :; done"
    )
    dockerfile = source / ".devcontainer" / "Dockerfile"
    dockerfile.write_text(f"FROM {GUEST_IMAGE}\nCMD {json.dumps(['/bin/sh', '-c', script])}\n")
    write_config(source, {"build": {"dockerfile": "Dockerfile"}, "overrideCommand": False, "remoteUser": "dev"})
    # devsy builds the image on the host's Docker engine for every backend and leaves it there; remove it after the
    # workspace (registered first, so it runs last).
    case.cleanup.add(f"remove the images devsy built for {wid}", lambda: _remove_built_images(wid))
    return source


def _remove_built_images(wid: str) -> None:
    import docker

    client = docker.from_env(timeout=60)
    for image in client.images.list(name=f"devsy-build-{wid}"):
        for tag in image.tags:
            client.images.remove(tag, force=True)


def _logs_with(devsy: DevsyHandle, wid: str, wanted: list[bytes], env: dict[str, str] | None = None) -> bytes:
    """`devsy logs` once every wanted marker is in it (the engine copies output asynchronously; bounded wait)."""
    def logs() -> bytes:
        result = devsy.run("logs", wid, env=env)
        assert result.exit_code == 0, f"devsy logs exited {result.exit_code}: {result.stderr[-2000:]!r}"
        return result.stdout

    # Polling the instance's output under a deadline, not synchronizing with our own code.
    return poll_until(logs, lambda out: all(marker in out for marker in wanted), timeout=LOGS_WAIT_S, interval=0.5,
                      what=f"devsy logs showing {wanted}")


@case("logs-cancel/logs-running")
def test_logs_running(provider: Provider, case: CaseContext, devsy: DevsyHandle) -> None:
    wid = case.workspace_id()
    markers = Markers(uuid.uuid4().hex[:12])
    devsy.up(_workload_source(case, markers, wid), wid).ws()

    logs = _logs_with(devsy, wid, [markers.started, markers.on_stderr])

    assert devsy.status(wid).ws().status == "running"
    assert markers.stopping not in logs, "the stop marker appeared although nothing stopped the workload"
    # Logs are ordinary output: a configured secret is masked there (the tunnel is the only unfiltered path).
    masked = _logs_with(devsy, wid, [markers.started], env={"DEVSY_REDACT": markers.secret})
    assert markers.secret.encode() not in masked and b"\n***\n" in masked, masked[-2000:]


@case("logs-cancel/logs-stopped")
def test_logs_stopped(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    wid = case.workspace_id()
    markers = Markers(uuid.uuid4().hex[:12])
    devsy.up(_workload_source(case, markers, wid), wid).ws()
    _logs_with(devsy, wid, [markers.started])  # the workload is past its trap: a stop now makes it print

    assert devsy.stop(wid).ws().status == "stopped"
    assert not only_instance(backend, wid).running, "the backend still reports the instance running"

    logs = _logs_with(devsy, wid, [markers.started, markers.on_stderr, markers.stopping])
    assert logs.index(markers.started) < logs.index(markers.stopping), "the workload's output is out of order"


# -- cancellation ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InstanceState:
    """What a cancellation must not change: the instance's created time (devsy's and the backend's view) and boot."""

    created_at: str
    backend_created_at: str
    boot_identity: str


def _observer(provider: Provider, devsy: DevsyHandle, backend: BackendInspector, wid: str) -> ProcessObserver:
    """Docker: `docker exec` into the container, bypassing devsy. Elsewhere: a separate `devsy exec` as root."""
    if provider.backend == "docker":
        return ProcessObserver.via_docker(only_instance(backend, wid).id)
    return ProcessObserver.via_devsy(devsy.cli, wid, env=devsy.env())


def _instance_state(devsy: DevsyHandle, backend: BackendInspector, wid: str) -> InstanceState:
    ws = devsy.status(wid).ws()
    assert ws.status == "running" and ws.instance is not None, f"workspace {wid} is {ws.status}: {ws.instance}"
    return InstanceState(ws.instance.created_at, only_instance(backend, wid).created_at,
                         devsy.sh(wid, _BOOT_IDENTITY).strip())


@dataclass
class CancelFixture:
    wid: str
    folder: str
    source: Path
    observer: ProcessObserver


def _cancel_fixture(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector, *,
                    image: str = GUEST_IMAGE, name: str = "") -> CancelFixture:
    source = local_source(case, name or "src", image=image)
    wid = case.workspace_id(name)
    ws = devsy.up(source, wid).ws()
    devsy.sh(wid, f"printf kept > {ws.workspace_folder}/kept.txt")
    return CancelFixture(wid, ws.workspace_folder, source, _observer(provider, devsy, backend, wid))


def _parse_ready(line: bytes, nonce: str, count: int) -> list[int]:
    """The pids of a `ready NONCE PID...` line the guest command printed."""
    match = re.fullmatch(rb"ready " + re.escape(nonce.encode()) + rb" (\d+)" * count + rb"\n", line)
    assert match, f"the guest command did not report ready with {nonce} and {count} pid(s): {line!r}"
    return [int(pid) for pid in match.groups()]


def _cancel(live: LiveCommand, observer: ProcessObserver, tree: list[ObservedProcess], signum: int, *,
            group: bool, record_figure: FigureSink, label: str) -> None:
    """Signal devsy; it must exit 128+signal and the observed guest processes must be dead, all within 10 s."""
    signalled = live.send_signal(signum, group=group)
    code = live.wait(CANCEL_BOUND_S)
    exited = time.monotonic() - signalled
    assert code is not None, f"{live.describe()} still running {CANCEL_BOUND_S:g}s after {signum!r}"
    assert code == 128 + signum, f"{live.describe()} exited {code} after {signum!r}, expected {128 + signum}"
    alive = observer.wait_dead(tree, timeout=max(0.0, CANCEL_BOUND_S - (time.monotonic() - signalled)))
    assert alive == [], f"guest processes still alive {CANCEL_BOUND_S:g}s after {signum!r}: {alive}"
    record_figure(f"{label}_exit_s", round(exited, 2))
    record_figure(f"{label}_tree_dead_s", round(time.monotonic() - signalled, 2))


def _assert_instance_kept(fixture: CancelFixture, devsy: DevsyHandle, backend: BackendInspector, before: InstanceState,
                          source_digest: dict[str, str]) -> None:
    assert _instance_state(devsy, backend, fixture.wid) == before, "the cancel restarted or replaced the instance"
    after = devsy.run("ssh", fixture.wid, "--command", f"cat {fixture.folder}/kept.txt; echo; echo next")
    assert (after.exit_code, after.stdout) == (0, b"kept\nnext\n"), f"the next command failed: {after.stderr!r}"
    assert tree_digest(fixture.source) == source_digest, "the workspace content changed"


# The child the cancelled shell waits for, carrying the nonce in its argv. Without python, a shell whose `-c` text
# does not end in the sleep (so no shell execs it in place) and whose $0 is the nonce.
PYTHON_CHILD = 'python3 -c "import time; time.sleep(4242)" {nonce}'
SHELL_CHILD = "sh -c 'sleep 4242; :' {nonce}"


def check_cancel_ready_tree(fixture: CancelFixture, devsy: DevsyHandle, backend: BackendInspector,
                            record_figure: FigureSink, *, child: str = PYTHON_CHILD, prefix: str = "") -> None:
    """SIGINT to devsy's group, then SIGTERM to devsy alone: each kills the guest shell and its child within 10 s,
    and the instance, its boot and the content stay."""
    before, digest = _instance_state(devsy, backend, fixture.wid), tree_digest(fixture.source)
    # Ctrl-C in a terminal signals devsy's whole process group; `kill` (a supervisor) signals devsy alone.
    for signum, group in ((signal.SIGINT, True), (signal.SIGTERM, False)):
        nonce = f"nonce-{uuid.uuid4().hex}"
        # The nonce rides in argv (root may not read another user's environ): in the shell's `-c` text and as an
        # argument of its child.
        command = f': {nonce}; {child.format(nonce=nonce)} & echo "ready {nonce} $$ $!"; wait'
        with LiveCommand(devsy, "ssh", fixture.wid, "--command", command) as live:
            shell, kid = _parse_ready(live.read_line(), nonce, 2)
            tree = [fixture.observer.identify(shell, nonce), fixture.observer.identify(kid, nonce)]
            _cancel(live, fixture.observer, tree, signum, group=group, record_figure=record_figure,
                    label=f"{prefix}ssh_{signal.Signals(signum).name.lower()}")
        _assert_instance_kept(fixture, devsy, backend, before, digest)


@case("logs-cancel/cancel-ready-tree")
def test_cancel_ready_tree(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector, record_figure: FigureSink
) -> None:
    check_cancel_ready_tree(_cancel_fixture(provider, case, devsy, backend), devsy, backend, record_figure)


@case("logs-cancel/cancel-ready-tree-no-python")
def test_cancel_ready_tree_no_python(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector, record_figure: FigureSink
) -> None:
    for image in no_python_images(case):  # not runnable (with the builder's evidence) when one cannot be had here
        name = image.split(":")[0].removeprefix("devsy-guest-")
        fixture = _cancel_fixture(provider, case, devsy, backend, image=image, name=name)
        check_cancel_ready_tree(fixture, devsy, backend, record_figure, child=SHELL_CHILD, prefix=f"{name}_")
        devsy.delete(fixture.wid).expect_success()  # one workspace at a time: the next image's up starts clean


@case("logs-cancel/cancel-blocked-stdin")
def test_cancel_blocked_stdin(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector, record_figure: FigureSink
) -> None:
    fixture = _cancel_fixture(provider, case, devsy, backend)
    before, digest = _instance_state(devsy, backend, fixture.wid), tree_digest(fixture.source)
    for command, signum in (("ssh", signal.SIGTERM), ("exec", signal.SIGINT)):
        nonce = f"nonce-{uuid.uuid4().hex}"
        # The shell runs a child that blocks reading stdin (not the last command, so the shell waits for it).
        reader_code = 'import os, sys; print("ready", sys.argv[1], os.getppid(), os.getpid(), flush=True); ' \
            "sys.stdin.buffer.read()"
        script = f": {nonce}; python3 -c '{reader_code}' {nonce}; echo unreachable"
        args = (["ssh", fixture.wid, "--command", script] if command == "ssh" else
                ["exec", fixture.wid, "--", "/bin/sh", "-c", script])
        caller_read, caller_write = os.pipe()  # the caller's stdin: kept open and never written, so the guest blocks
        try:
            with LiveCommand(devsy, *args, stdin=caller_read) as live:
                shell, reader = _parse_ready(live.read_line(), nonce, 2)
                tree = [fixture.observer.identify(shell, nonce), fixture.observer.identify(reader, nonce)]
                _cancel(live, fixture.observer, tree, signum, group=False, record_figure=record_figure,
                        label=f"{command}_blocked_{signal.Signals(signum).name.lower()}")
            assert b"unreachable" not in bytes(live.stdout.data), "the guest saw end of input before it was killed"
            # The caller's pipe is intact and nobody else reads it any more: what we write, we read back.
            os.write(caller_write, b"still ours\n")
            assert _read_back(caller_read) == b"still ours\n", "something devsy left behind still reads our stdin"
        finally:
            os.close(caller_read)
            os.close(caller_write)
        _assert_instance_kept(fixture, devsy, backend, before, digest)


def _read_back(fd: int, timeout: float = 5.0) -> bytes:
    """What is readable on `fd` within `timeout`, without blocking if another process took it first."""
    os.set_blocking(fd, False)
    ready, _, _ = select.select([fd], [], [], timeout)
    try:
        return os.read(fd, 64) if ready else b""
    except BlockingIOError:
        return b""
