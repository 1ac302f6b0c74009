"""The conformance suite's handle on a provider: launched like a host would (supervisor + handshake), plus
helpers that record every frame and a cleanup registry that removes what the run created."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devsy.runtime.conformance import commands as c
from devsy.runtime.conformance.checks import CaseBlocked, CaseNotOffered, StreamRecord, check
from devsy.runtime.wire.constants import HEALTH_SERVICE, MAX_FRAME
from devsy.runtime.host.client import RuntimeClient
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.plugin_client import LaunchOptions, PluginClient
from devsy.runtime.wire.status import DetailError, from_error
from devsy.runtime.v1 import runtime_pb2 as pb

LABEL_RUN = "dev.devsy.conformance-run"
UNARY_TIMEOUT_S = 300.0
# The RuntimeError detail kind a devsy-built provider sends when an instance was created but never booted.
BOOT_FAILED_KIND = "boot-failed"
EXEC_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Target:
    command: ProviderCommand
    image: str
    remote_user: str = "root"
    handshake_timeout: float = 60.0
    commands: c.CommandTable = c.TABLES["posix"]
    devsy_policy: bool = True  # hold the provider to devsy's policy checks too (devsy's own providers)


def start_frame(workspace_id: str, argv: list[str], **fields: object) -> pb.ExecClientMessage:
    return pb.ExecClientMessage(start=pb.ExecStart(workspace_id=workspace_id, argv=argv, **fields))


def input_frames(data: bytes) -> Iterator[pb.ExecClientMessage]:
    for offset in range(0, len(data), MAX_FRAME):
        yield pb.ExecClientMessage(stdin=data[offset:offset + MAX_FRAME])
    yield pb.ExecClientMessage(close_stdin=pb.CloseStdin())


class Session:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.run_id = secrets.token_hex(3)
        self._cleanups: list[tuple[str, Callable[[], None]]] = []
        self._exec_workspace = ""
        self.plugin: PluginClient | None = None
        # Set by the first RunImage whose instance could not boot: later cases needing an instance are blocked at
        # once with that evidence instead of booting (and failing) again, which takes a bounded but long time.
        self.blocked = ""
        self.blocked_by = ""
        self.current_case = ""

    # -- provider process ----------------------------------------------------------------------------------------
    def launch(self) -> None:
        self.plugin = PluginClient.launch(self.target.command,
                                          LaunchOptions(handshake_timeout=self.target.handshake_timeout))

    def check_info(self) -> None:
        """Info as a host reads it after every launch: a provider whose Info a host refuses (incompatible, malformed,
        or gone) fails the whole run once, with the host's own typed error, instead of every case."""
        assert self.plugin is not None, "provider not launched"
        RuntimeClient(self.plugin.stub, self.plugin.name, self.target.command.redactor()).info(opt_in_on_run=True)

    @property
    def provider_name(self) -> str:
        return self.plugin.name if self.plugin is not None else os.path.basename(self.target.command.binary)

    @property
    def commands(self) -> c.CommandTable:
        return self.target.commands

    def command(self, name: str):
        """The table's command for `name`; a case this kind of provider has no command for is NOT-OFFERED."""
        value = getattr(self.target.commands, name)
        if value is None:
            raise CaseNotOffered(f"the {self.target.commands.name!r} command table has no {name} command (this "
                                 "provider cannot run what the case needs; see devsy-conformance --commands)")
        return value

    @property
    def stub(self):
        assert self.plugin is not None, "provider not launched"
        return self.plugin.stub

    def healthy(self) -> bool:
        if self.plugin is None:
            return False
        try:
            reply = health_pb2_grpc.HealthStub(self.plugin.channel).Check(
                health_pb2.HealthCheckRequest(service=HEALTH_SERVICE), timeout=10)
        except grpc.RpcError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    def restart(self) -> None:
        """A fresh provider process (the old one is asked to shut down, then its tree is torn down)."""
        if self.plugin is not None:
            self.plugin.shutdown()
        self.plugin = None
        self.launch()

    def close(self) -> None:
        if self.plugin is not None:
            self.plugin.shutdown()
            self.plugin = None

    # -- cleanup registry (csi-sanity style: reverse order, past errors, "not found" is done) -------------------
    def on_cleanup(self, what: str, action: Callable[[], None]) -> None:
        self._cleanups.append((what, action))

    def cleanup(self) -> list[str]:
        errors = []
        while self._cleanups:
            what, action = self._cleanups.pop()
            try:
                if not self.healthy():
                    self.launch()
                action()
            except Exception as exc:  # noqa: BLE001 - every step runs; errors are reported together
                errors.append(f"{what}: {exc}")
        return errors

    # -- workspaces ----------------------------------------------------------------------------------------------
    def workspace_id(self, case: str) -> str:
        return f"conf-{self.run_id}-{case}"

    def run_request(self, workspace_id: str, **fields: object) -> pb.RunImageRequest:
        request = pb.RunImageRequest(workspace_id=workspace_id, image=self.target.image,
                                     entrypoint=c.WORKLOAD_ENTRYPOINT, args=c.WORKLOAD_ARGS,
                                     labels=[f"{LABEL_RUN}={self.run_id}"], remote_user=self.target.remote_user)
        for name, value in fields.items():
            setattr(request, name, value)
        return request

    def create(self, workspace_id: str, **fields: object) -> pb.ContainerDetails:
        if self.blocked:
            raise CaseBlocked(f"needs a booted instance; this host cannot boot one (shown by case {self.blocked_by}; "
                              "not retried)")
        self.on_cleanup(f"delete workspace {workspace_id}",
                        lambda: self.stub.Delete(pb.DeleteRequest(workspace_id=workspace_id), timeout=UNARY_TIMEOUT_S))
        try:
            self.stub.RunImage(self.run_request(workspace_id, **fields), timeout=UNARY_TIMEOUT_S)
        except grpc.RpcError as exc:
            evidence = _boot_failure(exc)
            if not evidence:
                raise
            self.blocked, self.blocked_by = evidence, self.current_case
            raise CaseBlocked(f"needs a booted instance; the provider could not boot one here: {evidence}") from None
        return self.require_status(workspace_id, "running", "after RunImage")

    def find(self, workspace_id: str) -> pb.FindResponse:
        return self.stub.Find(pb.FindRequest(workspace_id=workspace_id), timeout=UNARY_TIMEOUT_S)

    def require_status(self, workspace_id: str, status: str, when: str) -> pb.ContainerDetails:
        found = self.find(workspace_id)
        check(found.found, f"{when}: Find reports workspace {workspace_id} absent")
        check(found.container.state.status == status,
              f"{when}: status {found.container.state.status!r}, expected {status!r}")
        check(bool(found.container.id), f"{when}: Find reports a container without an id")
        return found.container

    def exec_workspace(self) -> str:
        """One running workspace shared by the exec cases."""
        if not self._exec_workspace:
            self.create(self.workspace_id("exec"))  # remembered only once it exists
            self._exec_workspace = self.workspace_id("exec")
        return self._exec_workspace

    # -- streams ---------------------------------------------------------------------------------------------------
    def exec(self, argv: list[str], stdin: bytes = b"", *, workspace_id: str = "",
             timeout: float = EXEC_TIMEOUT_S) -> StreamRecord:
        ws = workspace_id or self.exec_workspace()
        return self.exec_frames([start_frame(ws, argv), *input_frames(stdin)], timeout=timeout)

    def exec_frames(self, frames: Iterable[pb.ExecClientMessage], *, timeout: float = EXEC_TIMEOUT_S) -> StreamRecord:
        record = StreamRecord()
        for message in self.stub.Exec(iter(frames), timeout=timeout):
            record.add(message)
        return record


def _boot_failure(exc: grpc.RpcError) -> str:
    """The provider's message when `exc` says the instance never booted; "" for every other failure."""
    try:
        info = from_error(exc)
    except DetailError:
        return ""
    if info is None or info.details.get("kind") != BOOT_FAILED_KIND:
        return ""
    hint = info.details.get("hint", "")
    return f"{info.message}" + (f" (hint: {hint})" if hint else "")
