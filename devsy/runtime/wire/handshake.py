"""The go-plugin handshake line: `CORE|APP|NETWORK|ADDRESS|PROTOCOL[|SERVER_CERT]`, printed once on stdout."""

from __future__ import annotations

from dataclasses import dataclass

from devsy.runtime.wire.constants import APP_PROTOCOL_VERSION, CORE_PROTOCOL_VERSION
from devsy.runtime.wire.errors import HandshakeError

# Longer lines are cut in error messages: a provider that prints a blob on stdout should not flood the terminal.
_SHOW_CHARS = 200


@dataclass(frozen=True)
class HandshakeLine:
    core_version: int
    app_version: int
    network: str
    address: str
    protocol: str
    server_cert: str = ""

    def format(self) -> str:
        """The line as the provider prints it (the trailing `|` keeps the optional certificate field empty)."""
        return f"{self.core_version}|{self.app_version}|{self.network}|{self.address}|{self.protocol}|" \
               f"{self.server_cert}"


def unix_line(socket_path: str) -> HandshakeLine:
    return HandshakeLine(CORE_PROTOCOL_VERSION, APP_PROTOCOL_VERSION, "unix", socket_path, "grpc")


def parse_line(raw: str, provider: str) -> HandshakeLine:
    """Parse and check a provider's handshake line; HandshakeError names what is wrong and what to do."""
    line = raw.rstrip("\r\n")
    shown = line if len(line) <= _SHOW_CHARS else line[:_SHOW_CHARS] + "..."
    parts = line.split("|")
    if len(parts) < 5 or len(parts) > 6:
        raise HandshakeError(
            f"provider {provider} printed an unrecognised handshake line {shown!r} (expected "
            f"'{CORE_PROTOCOL_VERSION}|{APP_PROTOCOL_VERSION}|unix|<socket>|grpc|')",
            hint="the executable is not a devsy runtime provider, or it printed something on stdout before the "
                 "handshake (providers must log to stderr only)")
    core, app, network, address, protocol = parts[:5]
    if core != str(CORE_PROTOCOL_VERSION):
        raise HandshakeError(f"provider {provider} speaks go-plugin core protocol {core!r}, devsy speaks "
                             f"{CORE_PROTOCOL_VERSION}", hint="install a provider built with a go-plugin v1 SDK")
    if app != str(APP_PROTOCOL_VERSION):
        from devsy.runtime.wire.errors import IncompatibleVersion  # noqa: PLC0415 - only on this rare path

        raise IncompatibleVersion(f"provider {provider} negotiated runtime protocol version {app!r}, devsy speaks "
                                  f"{APP_PROTOCOL_VERSION}", hint="install a runtime that speaks major 1")
    if network != "unix" or not address:
        raise HandshakeError(f"provider {provider} offered network {network!r}; devsy connects over unix sockets "
                             f"only", hint="run the provider on the same machine; it must honour "
                                           "PLUGIN_UNIX_SOCKET_DIR")
    if protocol != "grpc":
        raise HandshakeError(f"provider {provider} offered plugin protocol {protocol!r}; devsy needs 'grpc'",
                             hint="install a provider built on the devsy runtime SDK (gRPC), not a net/rpc plugin")
    cert = parts[5] if len(parts) == 6 else ""
    if cert:
        raise HandshakeError(f"provider {provider} answered with an auto-mTLS certificate that devsy did not ask for",
                             hint="unset PLUGIN_CLIENT_CERT in the provider's environment")
    return HandshakeLine(int(core), int(app), network, address, protocol, cert)
