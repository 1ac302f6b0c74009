"""RemoteDriver: the Driver seam for a provider whose backend runs on another machine (`agent.local: false`).

The host reaches the machine only through the provider's exec command (transport.py). There it puts the devsy
agent (remote_agent.py: stream delivery with checksum, as into a workspace). Every Driver call for a workspace then
goes to that workspace's runtime: the agent installs the runtime binary in the workspace's folder under its home
(downloaded once, verified) and runs it there, and the runtime's gRPC connection is relayed back here (link.py),
where ExternalDriver speaks Runtime Protocol v1 to it exactly as to a local provider. So `up`, `ssh`, `exec`, `stop`,
`start`, `delete` and `logs` all work through the remote agent, and the runner never knows the difference.

One link per workspace, opened on its first call and closed at exit (or by delete). `delete` also removes the
workspace's folder on the remote machine (its runtime copy).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from typing import BinaryIO

from devsy.agent.install import launch_argv
from devsy.driver.base import (
    CancelToken,
    Capabilities,
    ContainerDetails,
    ExecRequest,
    ExecResult,
    RunOptions,
)
from devsy.driver.external.driver import ExternalDriver
from devsy.driver.remote.config import RemoteSelection, parse_remote_options
from devsy.driver.remote.errors import RemoteUnreachable
from devsy.driver.remote.link import RemoteRuntimeLink, ServeRequest
from devsy.driver.remote.remote_agent import RemoteAgent, ensure_remote_agent
from devsy.driver.remote.transport import ExecTransport
from devsy.driver.reuse import MountPolicy
from devsy.errors import DevsyError
from devsy.runtime.host.launcher import ProviderCommand

PROVIDER_NAME = "remote"
SCRATCH_PREFIX = "devsy-capabilities-"
# A scratch runtime lives for one question (its start is bounded by LAUNCH_TIMEOUT_S, 300 s); a folder older than this
# was left by a devsy killed meanwhile. The bound is generous so a slow live question elsewhere is never swept.
STALE_SCRATCH_S = 3600.0
# Lists a workspace folder's names under the agent's home, resolved as the agent resolves it (agent_home()).
_LIST_WORKSPACES = ('home=${1:-$HOME/.devsy-agent}; case $home in "~") home=$HOME;; "~/"*) home=$HOME/${home#"~/"};; '
                    'esac; ls -A -- "$home/workspaces" 2>/dev/null; exit 0')

log = logging.getLogger(__name__)


def scratch_id(now: float) -> str:
    """A scratch workspace id stamped with its start (host clock), so a later run can tell a stale one."""
    return f"{SCRATCH_PREFIX}{int(now)}-{secrets.token_hex(4)}"


def stale_scratch_ids(names: list[str], now: float, bound: float = STALE_SCRATCH_S) -> list[str]:
    """The scratch ids among `names` that started more than `bound` seconds before `now`."""
    stale = []
    for name in names:
        stamp = name[len(SCRATCH_PREFIX):].split("-", 1)[0] if name.startswith(SCRATCH_PREFIX) else ""
        if stamp.isdigit() and now - int(stamp) > bound:
            stale.append(name)
    return stale


class _WorkspaceRuntime(ExternalDriver):
    """ExternalDriver whose provider is one workspace's runtime on the remote machine."""

    def __init__(self, name: str, command: ProviderCommand, open_link: Callable[[], RemoteRuntimeLink]) -> None:
        super().__init__(name, command)
        self._open_link = open_link

    def _launch(self) -> RemoteRuntimeLink:  # type: ignore[override] - the same surface as PluginClient
        return self._open_link()


class RemoteDriver:
    name = PROVIDER_NAME

    def __init__(self, selection: RemoteSelection) -> None:
        self.config = selection.config
        self.runtime_env = dict(selection.runtime_env)
        self.transport = ExecTransport(self.config.exec_command)
        self._lock = threading.Lock()
        self._agent: RemoteAgent | None = None
        self._runtimes: dict[str, _WorkspaceRuntime] = {}
        self._last: _WorkspaceRuntime | None = None
        self._capabilities: Capabilities | None = None  # asked before any workspace call
        # One scratch runtime per driver: a second caller waits for the first one's answer. Not self._lock, which
        # the scratch run itself takes (agent(), _runtime()).
        self._scratch_lock = threading.Lock()

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> RemoteDriver:
        """Validates the provider config now; nothing is contacted until a workspace needs its runtime."""
        return cls(parse_remote_options(options))

    # -- the remote machine ----------------------------------------------------------------------------------------
    def agent(self) -> RemoteAgent:
        with self._lock:
            if self._agent is None:
                self._agent = ensure_remote_agent(self.transport, self.config, CancelToken())
            return self._agent

    def _runtime(self, workspace_id: str) -> _WorkspaceRuntime:
        with self._lock:
            runtime = self._runtimes.get(workspace_id)
            if runtime is None:
                runtime = self._runtimes[workspace_id] = self._new_runtime(workspace_id)
            self._last = runtime
            return runtime

    def _new_runtime(self, workspace_id: str) -> _WorkspaceRuntime:
        command = ProviderCommand(binary=self.config.runtime, env=dict(self.runtime_env))
        return _WorkspaceRuntime(f"{self.config.name}/{self.config.runtime}", command,
                                 lambda: self._open_link(workspace_id))

    def _open_link(self, workspace_id: str) -> RemoteRuntimeLink:
        request = ServeRequest(workspace_id=workspace_id, runtime=self.config.runtime,
                               binaries=self.config.binaries_json(), env=dict(self.runtime_env),
                               home=self.config.agent_home)
        return RemoteRuntimeLink.open(self.transport, self.agent().path, request,
                                      f"{self.config.name}/{self.config.runtime}")

    def close(self) -> None:
        with self._lock:
            runtimes, self._runtimes = list(self._runtimes.values()), {}
        for runtime in runtimes:
            runtime.close()

    def _remove_folder(self, workspace_id: str, *, hint: str = "") -> None:
        """Remove a workspace's folder (its runtime copy) under the agent's home on the remote machine."""
        args = ["workspace-remove", "--workspace", workspace_id]
        if self.config.agent_home:
            args += ["--home", self.config.agent_home]
        code, _, err = self.transport.run(launch_argv(self.agent().path, *args))
        if code != 0:
            raise RemoteUnreachable(f"removing workspace {workspace_id}'s folder on the remote machine failed "
                                    f"(exit {code}): {err.decode('utf-8', 'replace').strip()[-300:]}",
                                    hint=hint or f"remove {workspace_id} under the agent's home there by hand")

    def _remove_scratch(self, scratch: str) -> None:
        """Remove a scratch runtime's folder; a failure is a warning: the answer stands, and a later run sweeps it."""
        try:
            self._remove_folder(scratch)
        except DevsyError as exc:
            log.warning("warning: %s (hint: %s; a later capabilities question removes it after %gs)", exc.message,
                        exc.hint, STALE_SCRATCH_S)

    def _sweep_stale_scratch(self) -> None:
        """Remove scratch folders left by a devsy killed during its question (see STALE_SCRATCH_S)."""
        try:
            code, out, err = self.transport.run(["sh", "-c", _LIST_WORKSPACES, "sh", self.config.agent_home])
        except DevsyError as exc:
            log.warning("warning: cannot list stale capability runtimes on the remote machine: %s", exc.message)
            return
        if code != 0:
            log.warning("warning: listing stale capability runtimes on the remote machine failed (exit %s): %s",
                        code, err.decode("utf-8", "replace").strip()[-300:])
            return
        for name in stale_scratch_ids(out.decode("utf-8", "replace").split(), time.time()):
            self._remove_scratch(name)

    # -- Driver ----------------------------------------------------------------------------------------------------
    def open_backend(self) -> None:
        """Nothing to reach early: the remote host is contacted when a workspace first needs its runtime."""

    def capabilities(self) -> Capabilities:
        """The runtime's capabilities: from a workspace's runtime already answering, else from one started for this.

        They belong to the runtime binary, not to a workspace, so before any workspace call a runtime is started
        under a scratch id of its own (connected as every other call is), asked, ended, and its folder removed.
        """
        with self._lock:
            last, known = self._last, self._capabilities
        if last is not None:
            return last.capabilities()
        if known is not None:
            return known
        with self._scratch_lock:
            with self._lock:
                if self._capabilities is not None:
                    return self._capabilities  # another caller's scratch runtime answered meanwhile
            return self._ask_scratch_runtime()

    def _ask_scratch_runtime(self) -> Capabilities:
        self._sweep_stale_scratch()
        scratch = scratch_id(time.time())
        runtime = self._new_runtime(scratch)
        try:
            answered = runtime.capabilities()
            with self._lock:
                self._capabilities = answered  # before the cleanup: a failed removal must not lose the answer
        finally:
            try:
                runtime.close()
            finally:
                self._remove_scratch(scratch)
        return answered

    def find(self, workspace_id: str) -> ContainerDetails | None:
        return self._runtime(workspace_id).find(workspace_id)

    def run(self, workspace_id: str, options: RunOptions) -> ContainerDetails:
        return self._runtime(workspace_id).run(workspace_id, options)

    def start(self, workspace_id: str) -> None:
        self._runtime(workspace_id).start(workspace_id)

    def stop(self, workspace_id: str) -> None:
        self._runtime(workspace_id).stop(workspace_id)

    def delete(self, workspace_id: str) -> None:
        """Delete the instance, end the runtime, then remove the workspace's folder on the remote machine."""
        runtime = self._runtime(workspace_id)
        runtime.delete(workspace_id)
        runtime.close()
        with self._lock:
            self._runtimes.pop(workspace_id, None)
            if self._last is runtime:
                self._last = None
        self._remove_folder(workspace_id, hint="its instance is gone; rerun `devsy delete` to retry the folder")

    def exec(self, workspace_id: str, request: ExecRequest) -> ExecResult:
        return self._runtime(workspace_id).exec(workspace_id, request)

    def logs(self, workspace_id: str, out: BinaryIO) -> None:
        self._runtime(workspace_id).logs(workspace_id, out)

    def target_architecture(self, workspace_id: str) -> str:
        return self._runtime(workspace_id).target_architecture(workspace_id)

    def reuse_preflight(self, workspace_id: str, remote_user: str, mount_policy: MountPolicy | None) -> None:
        self._runtime(workspace_id).reuse_preflight(workspace_id, remote_user, mount_policy)
