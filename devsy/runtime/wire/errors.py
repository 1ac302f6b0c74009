"""Typed errors of the Runtime Protocol, on top of devsy.errors so the CLI and the runner treat them like any other.

Each class that corresponds to a RuntimeErrorCode names it in `code`; the SDK uses it to answer with that code, the
host to pick the class for a received code. Callers classify by class, never by message text.
"""

from __future__ import annotations

import inspect
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

# RuntimeError details keys. A devsy provider names its error's devsy kind under DETAIL_KIND (namespaced, so another
# provider's own "kind" detail never steers devsy) and its hint under DETAIL_HINT. It still sends the bare
# LEGACY_DETAIL_KIND for hosts (and the conformance suite) that predate DETAIL_KIND.
DETAIL_KIND = "dev.devsy.kind"
DETAIL_HINT = "hint"
LEGACY_DETAIL_KIND = "kind"

# The classes a provider's bare details["kind"] may restore (a provider that predates DETAIL_KIND), when the kind is
# consistent with the code; a Go provider sends no kind and gets the class of its code.
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


def provider_details(kind: str, hint: str) -> dict[str, str]:
    """The details a devsy provider sends with an error of `kind` (`hint` already redacted, as the message is):
    only the kind, a class attribute and never a value, and the hint the user would see anyway."""
    details = {DETAIL_KIND: kind, LEGACY_DETAIL_KIND: kind} if kind else {}
    if hint:
        details[DETAIL_HINT] = hint
    return details


def compatible_kind(code: str, kind: str) -> type[DevsyError] | None:
    """The registered class of `kind` when it may stand for a RuntimeError of `code`, else None.

    Compatible means: the code is not UNKNOWN (an unclassified error claims nothing), and the SDK answers with
    exactly this code for that class, so a kind only refines its code. A NOT_FOUND can become nothing but NotFound
    or a subclass of it, exit 2 (usage) comes only from INVALID_ARGUMENT, and no kind turns one code's class into
    another's. The class must also take (message, hint), as the host rebuilds it from those alone. A kind whose
    module this process has not imported is unknown here and falls back to the class of the code.
    """
    cls = error_class(kind) if kind else None
    if cls is None or code == "UNKNOWN" or _code_of_class(cls) != code:
        return None
    try:
        inspect.signature(cls).bind("message", hint="hint")
    except TypeError:
        return None
    return cls


def _class_for(code: str, details: Mapping[str, str], kind: str) -> type[DevsyError]:
    if DETAIL_KIND in details:  # a provider that knows the key: it alone decides, by the general rule
        return compatible_kind(code, details[DETAIL_KIND]) or CLASS_OF_CODE.get(code, UnknownRuntimeError)
    refined = error_class(kind)
    if refined in RESTORED_BY_KIND and _code_of_class(refined) == code:
        return refined
    return CLASS_OF_CODE.get(code, UnknownRuntimeError)


def error_for(code: str, message: str, hint: str = "", *, kind: str = "", runtime_message: str = "",
              retryable: bool = False, details: Mapping[str, str] | None = None) -> DevsyError:
    """The host's typed error for a RuntimeError received from a provider: the class of its devsy kind when
    `details` names a compatible one (see compatible_kind), else the class of its code (refined by a legacy `kind`)."""
    details = dict(details or {})
    error = _class_for(code, details, kind)(message, hint=hint)
    error.runtime_code = code  # type: ignore[attr-defined]
    error.runtime_message = runtime_message  # type: ignore[attr-defined]
    error.retryable = retryable  # type: ignore[attr-defined]
    error.details = details  # type: ignore[attr-defined]
    return error
