"""The fake runtime's Driver: lifecycle on JSON records, exec by scenario, misbehaviour by mode."""

from __future__ import annotations

import os
import platform
import secrets
import sys
from datetime import datetime, timezone
from typing import BinaryIO

from devsy.arch import normalize_arch
from devsy.driver.base import Capabilities, ContainerDetails, ExecRequest, ExecResult, InstanceMount, \
    InstanceStatus, MountType, RunOptions
from devsy.driver.reuse import MountPolicy, Ownership, check_reuse
from devsy.errors import AlreadyExists, NotFound
from devsy.runtime.conformance import commands as c
from devsy.runtime.wire.errors import PreconditionFailed, RuntimeFailure
from devsy.runtime.fake import go_scenarios, scenarios
from devsy.runtime.fake.modes import CRASH_EXIT_CODE, NONZERO_EXIT_CODE, Mode
from devsy.runtime.fake.state import StateStore, WorkspaceState


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class FakeDriver:
    name = "fake"

    def __init__(self, store: StateStore, mode: Mode = Mode.NORMAL) -> None:
        self.store = store
        self.mode = mode

    def open_backend(self) -> None:
        """Its backend is the state directory, which every call reads: nothing to reach early."""

    def capabilities(self) -> Capabilities:
        return Capabilities(mount_types=(MountType.BIND, MountType.VOLUME, MountType.TMPFS), logs=True,
                            reuse_preflight=True)

    def preflight(self, disable_auto_start: bool = False) -> None:
        if self.mode is Mode.FAILING_PREFLIGHT:
            raise PreconditionFailed("the fake runtime's preflight fails on purpose (mode failing-preflight)",
                                     hint="start the fake runtime without --mode failing-preflight")

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def _require(self, workspace_id: str) -> WorkspaceState:
        state = self.store.load(workspace_id)
        if state is None:
            raise NotFound(f"workspace {workspace_id} does not exist in the fake runtime",
                           hint="create it with RunImage first")
        return state

    def find(self, workspace_id: str) -> ContainerDetails | None:
        state = self.store.load(workspace_id)
        if state is None:
            return None
        return ContainerDetails(
            id=state.id, created_at=state.created_at, status=InstanceStatus(state.status),
            labels={} if self.mode is Mode.FIND_WITHOUT_LABELS else dict(state.labels), mounts=[InstanceMount(**m) for m in state.mounts], user=state.user, started_at=state.started_at)

    def run(self, workspace_id: str, options: RunOptions) -> ContainerDetails:
        if self.store.load(workspace_id) is not None and not options.allow_recreate:
            raise AlreadyExists(f"workspace {workspace_id} already exists", hint="delete it first, or recreate it")
        if self.mode is Mode.FAILING_RUN:
            raise RuntimeFailure("the fake runtime fails RunImage on purpose (mode failing-run)",
                                 hint="start the fake runtime without --mode failing-run")
        mounts = [options.workspace_mount] if options.workspace_mount else []
        now = _now()
        # Saving the new record replaces the old one in one rename: a replacement is all or nothing.
        self.store.save(WorkspaceState(
            workspace_id=workspace_id, id=secrets.token_hex(16), created_at=now, status="running", started_at=now,
            image=options.image, user=options.user, remote_user=options.remote_user,
            entrypoint=list(options.entrypoint or []), cmd=list(options.cmd or []), labels=dict(options.labels),
            mounts=[{"type": m.type.value, "source": m.source, "destination": m.target}
                    for m in [*mounts, *options.mounts]],
            env_keys=sorted(options.env)))
        found = self.find(workspace_id)
        assert found is not None
        return found

    def start(self, workspace_id: str) -> None:
        state = self._require(workspace_id)
        if state.status != "running":
            state.status, state.started_at = "running", _now()
            self.store.save(state)

    def stop(self, workspace_id: str) -> None:
        state = self._require(workspace_id)
        if state.status != "stopped":
            state.status = "stopped"
            self.store.save(state)

    def delete(self, workspace_id: str) -> None:
        self.store.delete(workspace_id)

    def reuse_preflight(self, workspace_id: str, remote_user: str, mount_policy: MountPolicy | None) -> None:
        check_reuse(workspace_id, self._require(workspace_id).labels, Ownership(remote_user, mount_policy))

    def target_architecture(self, workspace_id: str) -> str:
        return normalize_arch(platform.machine())

    # -- commands ------------------------------------------------------------------------------------------------
    def exec(self, workspace_id: str, request: ExecRequest) -> ExecResult:
        state = self._require(workspace_id)
        if state.status != "running":
            raise PreconditionFailed(f"workspace {workspace_id} is stopped", hint="start it first")
        if self.mode is Mode.EXEC_CRASH:
            return self._crash_mid_exec(request)
        if self.mode is Mode.EXEC_SLOW:
            request.cancel.wait()  # never answers on its own: only cancellation or a deadline ends it
            return ExecResult(130)
        if self.mode is Mode.NO_AGENT_TOOLS and scenarios.is_agent_script(request):
            return scenarios.no_agent_tools(request)
        scenario = go_scenarios.handler(request) if self.mode is Mode.CONFORMANCE else None
        result = scenarios.run(request, scenario)
        if self.mode is Mode.NONZERO_EXIT:
            request.stderr.write(b"fake runtime: failing on purpose (mode nonzero-exit)\n")
            return ExecResult(NONZERO_EXIT_CODE)
        if self.mode is Mode.SIGNAL_EXIT:
            return ExecResult(137, "SIGKILL")
        return result

    @staticmethod
    def _crash_mid_exec(request: ExecRequest) -> ExecResult:
        # A real child first, so a test can prove the supervisor leaves no process behind; then die once the
        # host has seen output and sent input (it has had the chance to look at the process tree).
        import subprocess  # noqa: PLC0415

        child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,  # noqa: S603,S607
                                 stderr=subprocess.DEVNULL)
        request.stdout.write(f"crashing soon; child {child.pid}\n".encode())
        for _ in scenarios.stdin_chunks(request):
            break
        print("fake runtime: crashing mid-Exec on purpose (mode exec-crash)", file=sys.stderr, flush=True)
        os._exit(CRASH_EXIT_CODE)

    def logs(self, workspace_id: str, out: BinaryIO) -> None:
        state = self._require(workspace_id)
        if self.mode is Mode.CONFORMANCE:
            out.write(go_scenarios.LOGS)  # as the Go fake's Logs, whatever the workload
        elif state.entrypoint + state.cmd == [c.WORKLOAD_ENTRYPOINT, *c.WORKLOAD_ARGS]:
            out.write(c.WORKLOAD_LOGS)
        out.flush()
