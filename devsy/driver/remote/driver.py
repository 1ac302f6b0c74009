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
from devsy.errors import DriverError
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
                command = ProviderCommand(binary=self.config.runtime, env=dict(self.runtime_env))
                runtime = _WorkspaceRuntime(f"{self.config.name}/{self.config.runtime}", command,
                                            lambda: self._open_link(workspace_id))
                self._runtimes[workspace_id] = runtime
            self._last = runtime
            return runtime

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

    # -- Driver ----------------------------------------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        if self._last is None:
            raise DriverError("the remote provider's capabilities are known once a workspace's runtime answered",
                              hint="call find() for the workspace first (devsy's commands always do)")
        return self._last.capabilities()

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
        args = ["workspace-remove", "--workspace", workspace_id]
        if self.config.agent_home:
            args += ["--home", self.config.agent_home]
        code, _, err = self.transport.run(launch_argv(self.agent().path, *args))
        if code != 0:
            raise RemoteUnreachable(f"removing workspace {workspace_id}'s folder on the remote machine failed "
                                    f"(exit {code}): {err.decode('utf-8', 'replace').strip()[-300:]}",
                                    hint="its instance is gone; rerun `devsy delete` to retry the folder")

    def exec(self, workspace_id: str, request: ExecRequest) -> ExecResult:
        return self._runtime(workspace_id).exec(workspace_id, request)

    def logs(self, workspace_id: str, out: BinaryIO) -> None:
        self._runtime(workspace_id).logs(workspace_id, out)

    def target_architecture(self, workspace_id: str) -> str:
        return self._runtime(workspace_id).target_architecture(workspace_id)

    def reuse_preflight(self, workspace_id: str, remote_user: str, mount_policy: MountPolicy | None) -> None:
        self._runtime(workspace_id).reuse_preflight(workspace_id, remote_user, mount_policy)
