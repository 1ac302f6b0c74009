"""Host-side validation of Info (on every Info): versions, required fields, and the capabilities that steer
destructive behaviour (recreate mode) or read-only checks (reuse preflight)."""

from __future__ import annotations

from dataclasses import dataclass

from devsy.driver.base import Capabilities
from devsy.runtime.wire.constants import API_MAJOR
from devsy.runtime.wire.convert import MOUNT_TYPE_FROM_PB
from devsy.runtime.wire.errors import IncompatibleVersion, InvalidProviderInfo
from devsy.runtime.v1 import runtime_pb2 as pb

_RECREATE_MODES = {pb.RECREATE_MODE_DELETE: "delete", pb.RECREATE_MODE_STOP: "stop", pb.RECREATE_MODE_ON_RUN: "on-run"}
_AUTHORS = "report this to the provider's authors, or install a provider that passes devsy-conformance"


@dataclass(frozen=True)
class ProviderDescription:
    """A validated Info answer."""

    api_minor: int
    driver_name: str
    driver_version: str
    runtime_name: str
    runtime_version: str
    capabilities: Capabilities
    recreate_mode: str  # "delete", "stop" or "on-run"
    provisioning_preflight: bool
    requires_mount_streaming: bool
    requires_workspace_chown: bool

    @property
    def recreate_on_run(self) -> bool:
        return self.recreate_mode == "on-run"


def validate_info(info: pb.InfoResponse, provider: str, *, opted_in_on_run: bool) -> ProviderDescription:
    if info.api_major != API_MAJOR:
        raise IncompatibleVersion(f"provider {provider} speaks runtime API {info.api_major}.{info.api_minor}; devsy "
                                  f"speaks major {API_MAJOR}", hint=f"install a runtime that speaks major {API_MAJOR}")
    missing = [name for name in ("driver_name", "driver_version", "runtime_name") if not getattr(info, name)]
    if not info.HasField("capabilities"):
        missing.append("capabilities")
    if missing:
        raise InvalidProviderInfo(f"provider {provider} left required Info fields empty: {', '.join(missing)}",
                                  hint=_AUTHORS)
    caps = info.capabilities
    mode = caps.recreate_mode
    if mode == pb.RECREATE_MODE_ON_RUN and not (info.api_minor >= 3 and opted_in_on_run):
        raise InvalidProviderInfo(f"provider {provider} advertised recreate mode ON_RUN to a host that did not opt in "
                                  f"(API 1.{info.api_minor})", hint=_AUTHORS)
    if mode not in _RECREATE_MODES:
        raise InvalidProviderInfo(f"provider {provider} advertised an unknown or unspecified recreate mode ({mode})",
                                  hint=_AUTHORS)
    if caps.reuse_preflight and info.api_minor < 2:
        raise InvalidProviderInfo(f"provider {provider} advertised reuse preflight with API 1.{info.api_minor} "
                                  "(it needs 1.2)", hint=_AUTHORS)
    unknown = [t for t in caps.mount_types if t not in MOUNT_TYPE_FROM_PB]
    if unknown:
        raise InvalidProviderInfo(f"provider {provider} advertised unknown mount types {unknown}", hint=_AUTHORS)
    return ProviderDescription(
        api_minor=info.api_minor, driver_name=info.driver_name, driver_version=info.driver_version,
        runtime_name=info.runtime_name, runtime_version=info.runtime_version,
        capabilities=Capabilities(mount_types=tuple(MOUNT_TYPE_FROM_PB[t] for t in caps.mount_types), logs=caps.logs,
                                  reuse_preflight=caps.reuse_preflight),
        recreate_mode=_RECREATE_MODES[mode], provisioning_preflight=caps.provisioning_preflight,
        requires_mount_streaming=caps.requires_mount_streaming, requires_workspace_chown=caps.requires_workspace_chown)
