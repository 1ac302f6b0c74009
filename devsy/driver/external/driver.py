"""ExternalDriver: the Driver seam over Runtime Protocol v1.

The provider is launched lazily (under the supervisor) on first use and validated through Info, with the host's
ON_RUN opt-in. Recreation: with ON_RUN, `run` sends allow_recreate (the runner sets it only for --recreate of an
existing instance); with DELETE/STOP the old instance is removed first, as old hosts did. Before a reuse the host
always compares the identity and full mount policy in the labels Find reports (the ReusePreflight request carries only
the identity, and a provider of API < 1.2 has no ReusePreflight at all), then calls ReusePreflight when advertised.
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, BinaryIO

from devsy.driver.base import LABEL_PREFIX, Capabilities, ContainerDetails, ExecRequest, ExecResult, RunOptions
from devsy.driver.reuse import MountPolicy, Ownership, check_reuse
from devsy.errors import NotFound
from devsy.runtime.wire.errors import ProviderUnavailable
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.provider_start import LaunchOptions, start_provider

if TYPE_CHECKING:  # imported when the provider is launched (_launch), not with this module: see there
    from devsy.runtime.host.client import RuntimeClient
    from devsy.runtime.host.info_check import ProviderDescription
    from devsy.runtime.host.plugin_client import PluginClient


class ExternalDriver:
    def __init__(self, name: str, command: ProviderCommand, options: LaunchOptions = LaunchOptions()) -> None:
        self.name = name
        self.command = command
        self._launch_options = options
        self._lock = threading.Lock()
        self._plugin: PluginClient | None = None
        self._client: RuntimeClient | None = None
        self._description: ProviderDescription | None = None

    # -- connection ------------------------------------------------------------------------------------------------
    def open_backend(self) -> None:
        """Launch the provider and take its Info now (a failure raises before any state is touched)."""
        self.client  # noqa: B018

    @property
    def client(self) -> RuntimeClient:
        with self._lock:
            if self._client is None:
                plugin = self._launch()
                from devsy.runtime.host.client import RuntimeClient  # loaded by _launch

                client = RuntimeClient(plugin.stub, plugin.name, self.command.redactor())
                try:
                    self._description = client.info(opt_in_on_run=True)
                except BaseException:
                    plugin.close()
                    raise
                self._plugin, self._client = plugin, client
                atexit.register(self.close)  # a graceful exit; a crash still tears it down through the lease
            return self._client

    def _launch(self) -> PluginClient:
        """Start the provider (a remote machine provider reaches its runtime another way: driver/remote).

        gRPC and the protocol's modules are imported only once the provider is starting: a provider takes ~100 ms
        to print its handshake line, and on another core that overlaps this process's ~50 ms of loading them, which
        every external command used to pay first."""
        started = start_provider(self.command, self._launch_options)
        try:
            from devsy.runtime.host.client import RuntimeClient  # noqa: F401 - loaded now, used by `client`
            from devsy.runtime.host.plugin_client import PluginClient
        except BaseException:
            started.abandon()
            raise
        return PluginClient.connect(started, self._launch_options)

    @property
    def description(self) -> ProviderDescription:
        self.client  # noqa: B018 - launches and validates Info on first use
        assert self._description is not None
        return self._description

    def close(self) -> None:
        with self._lock:
            if self._plugin is not None:
                self._plugin.shutdown()
            self._plugin = self._client = None

    # -- Driver ----------------------------------------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        return self.description.capabilities

    def find(self, workspace_id: str) -> ContainerDetails | None:
        return self.client.find(workspace_id)

    def run(self, workspace_id: str, options: RunOptions) -> ContainerDetails:
        client = self.client
        if options.allow_recreate and not self.description.recreate_on_run:
            # DELETE/STOP runtimes (and old protocol hosts): remove first, then create without permission.
            if self.description.recreate_mode == "stop":
                self._stop_if_present(workspace_id)
            client.delete(workspace_id)
            options = replace(options, allow_recreate=False)
        client.run_image(workspace_id, options)
        found = client.find(workspace_id)
        if found is None:
            raise ProviderUnavailable(f"provider {client.provider} reported RunImage success but Find does not see "
                                      f"workspace {workspace_id}", hint="report this to the provider's authors")
        return found

    def _stop_if_present(self, workspace_id: str) -> None:
        try:
            self.client.stop(workspace_id)
        except NotFound:
            pass

    def start(self, workspace_id: str) -> None:
        self.client.start(workspace_id)

    def stop(self, workspace_id: str) -> None:
        self.client.stop(workspace_id)

    def delete(self, workspace_id: str) -> None:
        self.client.delete(workspace_id)

    def exec(self, workspace_id: str, request: ExecRequest) -> ExecResult:
        return self.client.exec(workspace_id, request)

    def logs(self, workspace_id: str, out: BinaryIO) -> None:
        self.client.logs(workspace_id, out)

    def target_architecture(self, workspace_id: str) -> str:
        return self.client.target_architecture(workspace_id)

    def reuse_preflight(self, workspace_id: str, remote_user: str, mount_policy: MountPolicy | None) -> None:
        """The host's own label check first (every provider: the same refusal whether or not it advertises
        ReusePreflight), then the provider's check of what only it knows (e.g. msb's folder presentation)."""
        found = self.client.find(workspace_id)
        if found is None:
            raise NotFound(f"workspace {workspace_id} has no instance", hint="run `devsy up` to create it")
        # A provider may report none of the labels devsy set at creation (the protocol does not require Find to echo
        # them): then there is nothing to compare, and only its own ReusePreflight, if advertised, can refuse.
        if any(key.startswith(LABEL_PREFIX) for key in found.labels):
            check_reuse(workspace_id, found.labels, Ownership(remote_user, mount_policy))
        if self.capabilities().reuse_preflight:
            self.client.reuse_preflight(workspace_id, remote_user)
