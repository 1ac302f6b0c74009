"""Typed errors of the Runtime Protocol, on top of devsy.errors so the CLI and the runner treat them like any other.

Each class that corresponds to a RuntimeErrorCode names it in `code`; the SDK uses it to answer with that code, the
host to pick the class for a received code. Callers classify by class, never by message text.
"""

from __future__ import annotations

from collections.abc import Mapping

from devsy.errors import AlreadyExists, BackendUnavailable, BootFailed, Cancelled, ConfigError, DevsyError, \
    DriverError, ImageError, NotFound, RecreateRequired, UsageError, error_class


class RuntimeProtocolError(DriverError):
    """The provider broke the protocol (bad frame, missing error detail, invalid Info)."""

    kind = "runtime-protocol"


class InvalidProviderInfo(RuntimeProtocolError):
    kind = "invalid-provider-info"


class ProviderLaunchError(BackendUnavailable):
    """The provider could not be started or did not complete the go-plugin handshake."""

    kind = "provider-launch"


class HandshakeError(ProviderLaunchError):
    """The provider printed something other than a valid handshake line."""

    kind = "provider-handshake"


class HandshakeTimeout(ProviderLaunchError):
    kind = "provider-handshake-timeout"


class ProviderExited(ProviderLaunchError):
    """The provider exited before it completed the handshake."""

    kind = "provider-exited"


class CookieRejected(ProviderExited):
    """The provider refused to serve because it did not get the magic cookie it expects."""

    kind = "provider-cookie"


class ProviderUnavailable(BackendUnavailable):
    """The provider stopped answering (crashed, was killed, or its connection broke)."""

    kind = "provider-unavailable"
    code = "UNAVAILABLE"


class IncompatibleVersion(DriverError):
    kind = "incompatible-version"
    code = "INCOMPATIBLE_VERSION"


class InvalidArgument(DriverError):
    kind = "invalid-argument"
    code = "INVALID_ARGUMENT"


class Unsupported(DriverError):
    kind = "unsupported"
    code = "UNSUPPORTED"


class PreconditionFailed(DriverError):
    kind = "failed-precondition"
    code = "FAILED_PRECONDITION"


class PermissionDenied(DriverError):
    kind = "permission-denied"
    code = "PERMISSION_DENIED"


class RuntimeTimeout(DriverError):
    kind = "runtime-timeout"
    code = "TIMEOUT"


class RuntimeFailure(DriverError):
    kind = "runtime-failure"
    code = "RUNTIME_FAILURE"


class UnknownRuntimeError(DriverError):
    kind = "runtime-unknown"
    code = "UNKNOWN"


# RuntimeErrorCode name -> the host's class for it (RecreateRequired refines FAILED_PRECONDITION by detail kind).
CLASS_OF_CODE: dict[str, type[DevsyError]] = {
    "UNKNOWN": UnknownRuntimeError,
    "NOT_FOUND": NotFound,
    "ALREADY_EXISTS": AlreadyExists,
    "INVALID_ARGUMENT": InvalidArgument,
    "UNSUPPORTED": Unsupported,
    "UNAVAILABLE": ProviderUnavailable,
    "FAILED_PRECONDITION": PreconditionFailed,
    "PERMISSION_DENIED": PermissionDenied,
    "TIMEOUT": RuntimeTimeout,
    "CANCELLED": Cancelled,
    "RUNTIME_FAILURE": RuntimeFailure,
    "INCOMPATIBLE_VERSION": IncompatibleVersion,
}

# The classes a Python provider's details["kind"] (its error's `kind`) may restore on the host, when that kind is
# consistent with the code (a Go provider sends no kind and gets the class of its code). Kinds come from the classes,
# i.e. from the one registry in devsy.errors; a VM that never booted gets the same type as the built-in driver's.
RESTORED_BY_KIND: tuple[type[DevsyError], ...] = (RecreateRequired, ImageError, BackendUnavailable, BootFailed)


# Error type -> the code the SDK answers with, most specific first (a class's own `code` attribute wins).
_CODE_OF_TYPE: tuple[tuple[type[DevsyError], str], ...] = (
    (NotFound, "NOT_FOUND"), (AlreadyExists, "ALREADY_EXISTS"), (RecreateRequired, "FAILED_PRECONDITION"),
    (BackendUnavailable, "UNAVAILABLE"), (Cancelled, "CANCELLED"), (UsageError, "INVALID_ARGUMENT"),
    (ConfigError, "INVALID_ARGUMENT"), (DriverError, "RUNTIME_FAILURE"))


def _code_of_class(cls: type[BaseException]) -> str:
    explicit = getattr(cls, "code", None)
    if isinstance(explicit, str) and explicit in CLASS_OF_CODE:
        return explicit
    return next((code for base, code in _CODE_OF_TYPE if issubclass(cls, base)), "UNKNOWN")


def code_of(exc: BaseException) -> str:
    """The RuntimeErrorCode name the SDK answers with for a driver's exception."""
    explicit = getattr(exc, "code", None)
    if isinstance(explicit, str) and explicit in CLASS_OF_CODE:
        return explicit
    return _code_of_class(type(exc))


def error_for(code: str, message: str, hint: str = "", *, kind: str = "", runtime_message: str = "",
              retryable: bool = False, details: Mapping[str, str] | None = None) -> DevsyError:
    """The host's typed error for a RuntimeError received from a provider."""
    cls = CLASS_OF_CODE.get(code, UnknownRuntimeError)
    refined = error_class(kind)
    if refined in RESTORED_BY_KIND and _code_of_class(refined) == code:
        cls = refined
    error = cls(message, hint=hint)
    error.runtime_code = code  # type: ignore[attr-defined]
    error.runtime_message = runtime_message  # type: ignore[attr-defined]
    error.retryable = retryable  # type: ignore[attr-defined]
    error.details = dict(details or {})  # type: ignore[attr-defined]
    return error
