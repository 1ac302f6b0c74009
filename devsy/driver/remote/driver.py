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

import contextlib
import secrets
import threading
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

    # -- Driver ----------------------------------------------------------------------------------------------------
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
        scratch = f"devsy-capabilities-{secrets.token_hex(4)}"
        runtime = self._new_runtime(scratch)
        try:
            answered = runtime.capabilities()
        except BaseException:
            runtime.close()
            # The failure to report is the runtime's; a folder that could not be removed too is a lesser fault.
            with contextlib.suppress(DevsyError):
                self._remove_folder(scratch)
            raise
        runtime.close()
        self._remove_folder(scratch)
        with self._lock:
            self._capabilities = answered
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
