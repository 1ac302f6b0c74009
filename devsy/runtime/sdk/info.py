"""What a provider says about itself in Info, and the ON_RUN opt-in rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from devsy.runtime.wire.constants import API_MAJOR, API_MINOR

if TYPE_CHECKING:  # ProviderInfo is made before the handshake line; the messages are imported after it
    from devsy.driver.base import Capabilities
    from devsy.runtime.v1 import runtime_pb2 as pb


@dataclass(frozen=True)
class ProviderInfo:
    """Identity and the capabilities a Driver cannot express itself."""

    driver_name: str
    driver_version: str
    runtime_name: str
    runtime_version: str = ""
    # The driver replaces an existing workspace in `run` when RunOptions.allow_recreate is set (API 1.3 ON_RUN).
    recreate_on_run: bool = False
    requires_mount_streaming: bool = False
    requires_workspace_chown: bool = False
    provisioning_preflight: bool = False
    reprovision: bool = False
    api_major: int = API_MAJOR
    api_minor: int = API_MINOR


def info_response(info: ProviderInfo, caps: Capabilities, request: pb.InfoRequest) -> pb.InfoResponse:
    from devsy.runtime.v1 import runtime_pb2 as pb
    from devsy.runtime.wire.convert import MOUNT_TYPE_TO_PB

    # ON_RUN only to a host that opted in (API 1.3); an old host keeps DELETE behaviour.
    on_run = info.recreate_on_run and request.supports_recreate_on_run and info.api_minor >= 3
    return pb.InfoResponse(
        api_major=info.api_major, api_minor=info.api_minor, driver_name=info.driver_name,
        driver_version=info.driver_version, runtime_name=info.runtime_name, runtime_version=info.runtime_version,
        capabilities=pb.Capabilities(
            mount_types=[MOUNT_TYPE_TO_PB[t] for t in caps.mount_types],
            requires_mount_streaming=info.requires_mount_streaming,
            requires_workspace_chown=info.requires_workspace_chown,
            recreate_mode=pb.RECREATE_MODE_ON_RUN if on_run else pb.RECREATE_MODE_DELETE,
            provisioning_preflight=info.provisioning_preflight, reprovision=info.reprovision, logs=caps.logs,
            reuse_preflight=caps.reuse_preflight and info.api_minor >= 2,
        ),
    )
