"""Starting a provider under its supervisor: the half of a launch that needs no gRPC (plugin_client.py reads the
handshake line and dials).

Apart so that a caller can load gRPC's modules (~50 ms of CPU) while the provider starts on another core, which
takes longer than that before it prints its handshake line (driver/external/driver.py does).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from dataclasses import dataclass

from devsy.runtime.host.launcher import ProviderCommand, SupervisedProvider
from devsy.runtime.wire.constants import APP_PROTOCOL_VERSION, COOKIE_KEY, COOKIE_VALUE, ENV_PROTOCOL_VERSIONS, \
    ENV_SOCKET_DIR
from devsy.runtime.wire.errors import ProviderLaunchError


@dataclass(frozen=True)
class HandshakeConfig:
    """Like go-plugin's HandshakeConfig: the cookie the host sends and the protocol versions it accepts."""

    cookie_key: str = COOKIE_KEY
    cookie_value: str = COOKIE_VALUE
    protocol_versions: str = str(APP_PROTOCOL_VERSION)


@dataclass(frozen=True)
class LaunchOptions:
    handshake_timeout: float = 60.0  # go-plugin's default start timeout
    health_timeout: float = 10.0
    handshake: HandshakeConfig = HandshakeConfig()


@dataclass
class StartedProvider:
    """A provider under its supervisor that has not completed the handshake yet, and the private folder its socket
    will be in. `abandon()` it when it will not be connected to."""

    provider: SupervisedProvider
    socket_dir: str

    def abandon(self) -> None:
        self.provider.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)


def start_provider(command: ProviderCommand, options: LaunchOptions = LaunchOptions()) -> StartedProvider:
    """Start `command` under a supervisor; raises ProviderLaunchError when it cannot be started at all."""
    resolved = shutil.which(command.binary)
    if resolved is None:
        raise ProviderLaunchError(f"provider executable {command.binary!r} was not found or is not executable",
                                  hint="install the provider, or pass its full path")
    command = dataclasses.replace(command, binary=resolved)
    socket_dir = tempfile.mkdtemp(prefix="devsy-plugin-")  # 0700: only this user can reach the socket
    transport = {options.handshake.cookie_key: options.handshake.cookie_value,
                 ENV_PROTOCOL_VERSIONS: options.handshake.protocol_versions, ENV_SOCKET_DIR: socket_dir}
    try:
        return StartedProvider(SupervisedProvider(command, transport), socket_dir)
    except OSError as exc:
        shutil.rmtree(socket_dir, ignore_errors=True)
        raise ProviderLaunchError(f"cannot start the runtime supervisor for provider {command.name}: "
                                  f"{exc.strerror or exc}", hint="check that devsy is installed intact") from exc
    except BaseException:
        shutil.rmtree(socket_dir, ignore_errors=True)
        raise
