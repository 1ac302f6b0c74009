"""A protocol-level handle on an external provider, for cases about requests devsy's CLI never sends.

`devsy up` only sends RunImage for an existing workspace together with permission (`--recreate`), so "RunImage
without permission is ALREADY_EXISTS" can only be seen by speaking the protocol. This launches the same provider
executable with the same options devsy uses for `--provider NAME` (devsy.driver.external.providers), under devsy's
runtime supervisor and go-plugin handshake, and talks to it with devsy's own runtime client: the contract under test
is that executable's, so nothing here is a stand-in. Scenarios see only the small typed API below.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from harness.deadline import Deadline
from harness.providers import Provider

# Unary calls get at most this long (less when the case deadline is nearer); RunImage keeps the client's own bound.
CALL_CAP = 120.0


@dataclass(frozen=True)
class FoundInstance:
    id: str
    created_at: str
    running: bool


class ProviderRefused(AssertionError):
    """The provider answered with a RuntimeError; `code` is its RuntimeErrorCode name (e.g. ALREADY_EXISTS)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class MountSpec:
    """A mount in a RunImage request: type (bind|volume|tmpfs), target, optional source."""

    type: str
    target: str
    source: str = ""


class ProviderProcess:
    """One running provider process and devsy's typed client on it."""

    def __init__(self, client: object) -> None:
        self._client = client

    def recreate_mode(self, *, opt_in: bool) -> str:
        """The recreate mode Info advertises to a host that did (not) opt in to ON_RUN: on-run, delete or stop."""
        return str(self._call(lambda c: c.info(opt_in_on_run=opt_in)).recreate_mode)

    def find(self, workspace_id: str) -> FoundInstance | None:
        found = self._call(lambda c: c.find(workspace_id))
        return None if found is None else FoundInstance(found.id, found.created_at, found.running)

    def run_image(self, workspace_id: str, image: str, *, allow_recreate: bool = False,
                  mounts: tuple[MountSpec, ...] = ()) -> None:
        """RunImage with `allow_recreate` as given; raises ProviderRefused with the provider's code."""
        from devsy.driver.base import Mount, MountType, RunOptions

        options = RunOptions(image=image, remote_user="dev", allow_recreate=allow_recreate,
                             mounts=[Mount(MountType(m.type), m.target, m.source) for m in mounts])
        self._call(lambda c: c.run_image(workspace_id, options))

    def _call(self, action):  # type: ignore[no-untyped-def]
        from devsy.errors import DevsyError

        try:
            return action(self._client)
        except DevsyError as exc:
            code = getattr(exc, "runtime_code", "") or exc.kind
            raise ProviderRefused(str(code), exc.message) from None


@contextlib.contextmanager
def provider_process(provider: Provider, deadline: Deadline) -> Iterator[ProviderProcess]:
    """A fresh process of `provider`'s executable (external kinds only), shut down cleanly on exit."""
    from devsy.driver.external.providers import is_external, provider_command
    from devsy.runtime.host.client import RuntimeClient
    from devsy.runtime.host.plugin_client import PluginClient

    name = provider.cli_args[provider.cli_args.index("--provider") + 1]
    if not is_external(name):
        raise ValueError(f"{provider.name} (--provider {name}) is not an external provider")
    command = provider_command(name, dict(provider.default_options))
    command = dataclasses.replace(command, env={**command.env, **provider.environment()})  # a -sim column's msb
    plugin = PluginClient.launch(command)
    try:
        timeout = deadline.timeout(f"provider {name} calls", CALL_CAP)
        yield ProviderProcess(RuntimeClient(plugin.stub, plugin.name, command.redactor(), timeout=timeout))
    finally:
        plugin.shutdown()  # GRPCController.Shutdown, then the lease: its whole process group is gone after this
