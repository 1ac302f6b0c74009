"""Host side of the go-plugin handshake: launch a provider under the supervisor (provider_start.py), read its line,
dial, health-check.

Every failure before the provider is usable is a typed error that names the provider (never its args or env) and
carries the redacted tail of its stderr: CookieRejected, ProviderExited, HandshakeTimeout, HandshakeError,
IncompatibleVersion, ProviderUnavailable.
"""

from __future__ import annotations

import shutil

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devsy.errors import DevsyError
from devsy.runtime.wire.constants import HEALTH_SERVICE, is_not_a_plugin_refusal
from devsy.runtime.wire.errors import CookieRejected, HandshakeTimeout, ProviderExited, ProviderUnavailable
from devsy.runtime.goplugin import grpc_controller_pb2, grpc_controller_pb2_grpc
from devsy.runtime.wire.handshake import HandshakeLine, parse_line
from devsy.runtime.host.launcher import ProviderCommand, SupervisedProvider
# HandshakeConfig and LaunchOptions live beside the gRPC-free start; imported from here too, as they always were.
from devsy.runtime.host.provider_start import HandshakeConfig, LaunchOptions, StartedProvider, start_provider  # noqa
from devsy.runtime.host.stdio_forward import StdioForwarder
from devsy.runtime.v1 import runtime_pb2_grpc

_SUPERVISOR_EXIT_WAIT_S = 5.0


def _with_tail(message: str, tail: str) -> str:
    return f"{message}\n  provider stderr (last lines):\n    " + tail.replace("\n", "\n    ") if tail else message


class PluginClient:
    """A running provider: its supervisor, the gRPC channel and stubs. Close it when done."""

    def __init__(self, provider: SupervisedProvider, socket_dir: str, line: HandshakeLine,
                 channel: grpc.Channel) -> None:
        self.provider = provider
        self.line = line
        self.channel = channel
        self.stub = runtime_pb2_grpc.RuntimeDriverStub(channel)
        self._socket_dir = socket_dir
        self.stdio: StdioForwarder | None = None

    @property
    def name(self) -> str:
        return self.provider.command.name

    @classmethod
    def launch(cls, command: ProviderCommand, options: LaunchOptions = LaunchOptions()) -> PluginClient:
        """Start the provider and return once it answers its health check; raises a typed error otherwise."""
        return cls.connect(start_provider(command, options), options)

    @classmethod
    def connect(cls, started: StartedProvider, options: LaunchOptions = LaunchOptions()) -> PluginClient:
        """Complete the launch of a started provider: its handshake line, the channel, the health check."""
        provider = started.provider
        try:
            line = cls._handshake(provider, options)
            channel = grpc.insecure_channel(f"unix:{line.address}")
            client = cls(provider, started.socket_dir, line, channel)
            client._health_check(options.health_timeout)
            # At once: a go-plugin provider's stdout/stderr writes block until a host drains this stream.
            client.stdio = StdioForwarder(channel, provider.command.name, provider.command.secrets())
            return client
        except DevsyError as exc:
            started.abandon()
            redact = provider.command.redactor()  # a provider may echo its args or env in the line or on stderr
            raise type(exc)(redact(exc.message), hint=redact(exc.hint)) from exc.__cause__
        except BaseException:
            started.abandon()
            raise

    @staticmethod
    def _handshake(provider: SupervisedProvider, options: LaunchOptions) -> HandshakeLine:
        name = provider.command.name
        raw, timed_out = provider.read_line(options.handshake_timeout)
        if timed_out:
            raise HandshakeTimeout(
                _with_tail(f"provider {name} did not complete the handshake within "
                           f"{options.handshake_timeout:g}s", provider.stderr_tail()),
                hint="the provider may be hung or waiting for something; check its stderr above, or raise the "
                     "handshake timeout")
        if raw is None:
            code = provider.exit_code(wait=_SUPERVISOR_EXIT_WAIT_S)
            tail = provider.stderr_tail(wait=1.0)
            if is_not_a_plugin_refusal(tail):
                raise CookieRejected(
                    _with_tail(f"provider {name} refused to serve: it did not get the magic cookie it expects",
                               tail),
                    hint=f"it is not a devsy runtime provider (devsy sends {options.handshake.cookie_key}); install "
                         "a provider built on the devsy runtime SDK")
            status = "" if code is None else f" (supervisor exit status {code})"
            raise ProviderExited(_with_tail(f"provider {name} exited before completing the handshake{status}", tail),
                                 hint="run the provider's own diagnostics, or check its stderr above")
        try:
            return parse_line(raw, name)
        except DevsyError as exc:
            raise type(exc)(_with_tail(exc.message, provider.stderr_tail()), hint=exc.hint) from None

    def _health_check(self, timeout: float) -> None:
        stub = health_pb2_grpc.HealthStub(self.channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=HEALTH_SERVICE), timeout=timeout)
        except grpc.RpcError as exc:
            raise ProviderUnavailable(
                _with_tail(f"provider {self.name} completed the handshake but does not answer its health check "
                           f"({exc.code().name})", self.provider.stderr_tail(wait=1.0)),
                hint="the provider crashed or is hung; check its stderr above") from exc
        if reply.status != health_pb2.HealthCheckResponse.SERVING:
            raise ProviderUnavailable(f"provider {self.name} reports health status "
                                      f"{health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}",
                                      hint="retry; if it persists, check the provider's stderr")

    def shutdown(self, timeout: float = 5.0) -> None:
        """Ask the provider to exit (GRPCController.Shutdown), then release everything."""
        stub = grpc_controller_pb2_grpc.GRPCControllerStub(self.channel)
        try:
            stub.Shutdown(grpc_controller_pb2.Empty(), timeout=timeout)
        except grpc.RpcError:
            pass  # already gone or hung: closing the lease below tears it down either way
        self.provider.exit_code(wait=timeout)
        self.close()

    def close(self) -> None:
        """Close the channel and the lease: the supervisor SIGKILLs the provider's process group."""
        self.channel.close()  # cancels the stdio stream too
        if self.stdio is not None:
            self.stdio.close()
        self.provider.close()
        shutil.rmtree(self._socket_dir, ignore_errors=True)

    def __enter__(self) -> PluginClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
