"""A workspace's runtime running on the remote machine, reached through the remote agent's `runtime-serve`.

The host starts `<exec command> <agent> runtime-serve`, writes the request line (with the runtime's options, so
never on argv) and reads the agent's status line: a typed error (checksum mismatch, download failure, a runtime
that did not start), or the runtime's go-plugin handshake line, which is checked here as for a local provider. Then
a private local socket (relay.py) carries gRPC over the same stdin/stdout, and the link offers what PluginClient
offers (stub, name, shutdown, close), so ExternalDriver drives it unchanged. Closing the link ends the exec
command's input, which is the remote runtime's lease.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from dataclasses import asdict, dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devsy import process_tree
from devsy.agent.install import launch_argv
from devsy.driver.remote.errors import RemoteUnreachable, agent_error
from devsy.driver.remote.relay import SocketRelay
from devsy.driver.remote.transport import ExecTransport
from devsy.errors import DevsyError
from devsy.redaction import Redactor
from devsy.runtime.wire.constants import HEALTH_SERVICE
from devsy.runtime.goplugin import grpc_controller_pb2, grpc_controller_pb2_grpc
from devsy.runtime.host.stderr_tail import StderrTail
from devsy.runtime.host.stdio_forward import StdioForwarder
from devsy.runtime.wire.handshake import parse_line
from devsy.runtime.v1 import runtime_pb2_grpc

# Covers the first start's download (bounded retries) and the runtime unpacking its libraries on a new machine.
LAUNCH_TIMEOUT_S = 300.0
HEALTH_TIMEOUT_S = 10.0
_EXIT_WAIT_S = 10.0


@dataclass(frozen=True)
class ServeRequest:
    """What the remote agent needs to serve one workspace's runtime (runtime_serve.py reads it)."""

    workspace_id: str
    runtime: str
    binaries: dict[str, list[dict[str, str]]]
    env: dict[str, str] = field(default_factory=dict)  # may hold secrets: stdin only, redacted from errors
    home: str = ""
    handshake_timeout: float = 120.0

    def line(self) -> bytes:
        return (json.dumps(asdict(self), sort_keys=True) + "\n").encode()


def _with_tail(message: str, tail: str) -> str:
    return f"{message}\n  remote stderr (last lines):\n    " + tail.replace("\n", "\n    ") if tail else message


class RemoteRuntimeLink:
    def __init__(self, name: str, proc: subprocess.Popen, tail: StderrTail, relay: SocketRelay,
                 channel: grpc.Channel) -> None:
        self.name, self._proc, self._tail, self._relay, self.channel = name, proc, tail, relay, channel
        self.stub = runtime_pb2_grpc.RuntimeDriverStub(channel)
        self._closed = False
        self.stdio: StdioForwarder | None = None

    @classmethod
    def open(cls, transport: ExecTransport, agent_path: str, request: ServeRequest, name: str,
             timeout: float = LAUNCH_TIMEOUT_S) -> RemoteRuntimeLink:
        """Start the runtime there and return once it answers its health check; raises a typed error otherwise."""
        redact = Redactor(list(request.env.values()))
        proc = transport.popen(launch_argv(agent_path, "runtime-serve"))
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        tail = StderrTail(proc.stderr, redact, "devsy-remote-stderr")
        relay, channel = None, None
        try:
            try:
                _write_all(proc.stdin, request.line())
            except BrokenPipeError:
                pass  # the exec command already ended: no status line follows, and its stderr says why
            status, leftover = _status_line(proc, timeout)
            if status is None:
                code = _exit_code(proc)
                raise RemoteUnreachable(_with_tail(f"the devsy agent on the remote machine ended (exit {code}) "
                                                   f"before serving runtime {request.runtime}", tail.text(1.0)),
                                        hint="check the provider's exec command and the remote machine's python3")
            if not status.get("ok"):
                error = status.get("error") or {}
                raise agent_error(str(error.get("kind", "")), _with_tail(str(error.get("message", "")),
                                                                          tail.text(1.0)), str(error.get("hint", "")))
            parse_line(str(status.get("handshake", "")), name)  # versions and protocol, as for a local provider
            relay = SocketRelay(proc.stdin, proc.stdout.fileno(), leftover)
            channel = grpc.insecure_channel(f"unix:{relay.path}")
            link = cls(name, proc, tail, relay, channel)
            link._health_check()
            # As for a local provider (plugin_client.py): its stdio writes block until a host drains them.
            link.stdio = StdioForwarder(channel, name, list(request.env.values()))
            return link
        except BaseException as exc:
            if channel is not None:
                channel.close()
            if relay is not None:
                relay.close()
            _end(proc)
            if isinstance(exc, DevsyError):
                raise type(exc)(redact(exc.message), hint=redact(exc.hint)) from exc.__cause__
            raise

    def _health_check(self) -> None:
        try:
            reply = health_pb2_grpc.HealthStub(self.channel).Check(
                health_pb2.HealthCheckRequest(service=HEALTH_SERVICE), timeout=HEALTH_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise RemoteUnreachable(_with_tail(f"runtime {self.name} on the remote machine does not answer its "
                                               f"health check ({exc.code().name})", self._tail.text(1.0)),
                                    hint="check its stderr above") from exc
        if reply.status != health_pb2.HealthCheckResponse.SERVING:
            raise RemoteUnreachable(f"runtime {self.name} on the remote machine is not serving", hint="retry")

    def shutdown(self, timeout: float = 5.0) -> None:
        """Ask the runtime to exit (GRPCController.Shutdown), then release everything."""
        try:
            grpc_controller_pb2_grpc.GRPCControllerStub(self.channel).Shutdown(grpc_controller_pb2.Empty(),
                                                                               timeout=timeout)
        except grpc.RpcError:
            pass  # already gone: closing below ends the lease either way
        self._relay.ended.wait(timeout)
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.channel.close()
        if self.stdio is not None:
            self.stdio.close()
        _end(self._proc)
        self._relay.close()

    def stderr_tail(self) -> str:
        return self._tail.text()


def _status_line(proc: subprocess.Popen, timeout: float) -> tuple[dict | None, bytes]:
    """The agent's JSON status line (None at EOF) and whatever bytes followed it."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RemoteUnreachable(f"the devsy agent on the remote machine did not answer within {timeout:g}s",
                                        hint="check the remote machine; a first start downloads the runtime")
            if selector.select(remaining):
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None, b""
                data += chunk
    line, _, leftover = data.partition(b"\n")
    try:
        return json.loads(line), leftover
    except ValueError:
        raise RemoteUnreachable(f"the devsy agent on the remote machine answered {line[:200]!r}, not a status line",
                                hint="redeliver the agent: rerun the command") from None


def _write_all(stream, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[stream.write(view) or 0:]


def _exit_code(proc: subprocess.Popen) -> int | str:
    code = process_tree.wait_child(proc, _EXIT_WAIT_S)
    return "unknown: still running" if code is None else code


def _end(proc: subprocess.Popen, grace: float = _EXIT_WAIT_S) -> None:
    """End the exec command: closing its input is the remote lease's end; kill its group if it lingers past `grace`
    seconds, and reap."""
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass
    # term=False: the closed input already told it to end; the grace is the wait for that, then KILL (bounded).
    process_tree.stop_child(proc, grace=grace, term=False)
