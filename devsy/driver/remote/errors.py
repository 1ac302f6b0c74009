"""Typed errors of remote machine providers; the remote agent's error kinds map onto them (never parsed from text)."""

from __future__ import annotations

from devsy.errors import BackendUnavailable, DevsyError, DriverError, UsageError
from devsy.runtime.wire.errors import HandshakeError, HandshakeTimeout, ProviderExited


class ProviderConfigError(UsageError):
    """The provider config file is missing, malformed, or asks for something unsupported."""

    kind = "provider-config"


class RemoteUnreachable(BackendUnavailable):
    """The provider's exec command did not get us onto the remote machine (or the agent there did not answer)."""

    kind = "remote-unreachable"


class RuntimeDownloadFailed(DriverError):
    """A runtime binary could not be downloaded (the URL answers an error, or keeps failing)."""

    kind = "runtime-download"


class RuntimeChecksumMismatch(RuntimeDownloadFailed):
    """The downloaded bytes do not have the pinned sha256: refused, nothing installed."""

    kind = "runtime-checksum"


class RuntimeUnsupported(DriverError):
    """The remote machine cannot run this provider config (no binary for its os/arch, a bad request)."""

    kind = "runtime-unsupported"


# The remote agent's `kind` -> the error class a user (and `--json`) sees.
AGENT_ERROR_KINDS: dict[str, type[DevsyError]] = {
    "download-failed": RuntimeDownloadFailed,
    "download-checksum": RuntimeChecksumMismatch,
    "runtime-unsupported": RuntimeUnsupported,
    "remote-io": DriverError,
    "provider-exited": ProviderExited,
    "provider-handshake": HandshakeError,
    "provider-handshake-timeout": HandshakeTimeout,
}


def agent_error(kind: str, message: str, hint: str) -> DevsyError:
    return AGENT_ERROR_KINDS.get(kind, DriverError)(message, hint=hint)
