"""Putting the devsy agent on the remote machine: the same executable and the same stream delivery (checksum,
retries, fresh source per attempt) as for a workspace (devsy/agent/delivery.py), over the provider's exec command.

Where the bytes come from: the provider config's `agent.source` entry for the remote's os/arch, a checksum-pinned
download into this host's download cache made only when the remote machine lacks that agent; without one, this
host's agent (DEVSY_AGENT_BINARY, else the cached build), as for workspaces.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from devsy.agent.artifact import AgentArtifact, resolve_artifact
from devsy.agent.delivery import StreamDelivery
from devsy.agent.errors import AgentError
from devsy.agent.guest.download import DownloadError, Source, fetch
from devsy.agent.wheels import cache_root
from devsy.arch import normalize_arch
from devsy.driver.base import CancelToken
from devsy.driver.remote.config import RemoteProviderConfig
from devsy.driver.remote.errors import RemoteUnreachable
from devsy.driver.remote.transport import ExecTransport

DOWNLOAD_CACHE_ENV = "DEVSY_DOWNLOAD_CACHE"


@dataclass(frozen=True)
class RemoteAgent:
    path: str  # where the agent lives on the remote machine
    sha256: str
    os: str
    arch: str
    transferred: bool  # False: the remote machine already had it


def host_download_cache() -> Path:
    """This host's cache of checksum-pinned downloads: `$DEVSY_DOWNLOAD_CACHE`, else `<devsy cache>/downloads`."""
    explicit = os.environ.get(DOWNLOAD_CACHE_ENV, "")
    return Path(explicit).expanduser() if explicit else cache_root() / "downloads"


def remote_platform(transport: ExecTransport) -> tuple[str, str]:
    """(os, arch) of the remote machine, in the provider config's terms (`linux`, `amd64`)."""
    code, out, err = transport.run(["uname", "-sm"])
    words = out.decode("utf-8", "replace").split()
    if code != 0 or len(words) != 2:
        detail = err.decode("utf-8", "replace").strip()[-300:] or f"exit {code}"
        raise RemoteUnreachable(f"the provider's exec command does not reach the remote machine: {detail}",
                                hint="check exec.command in the provider config, and that the machine is up")
    return words[0].lower(), normalize_arch(words[1])


def ensure_remote_agent(transport: ExecTransport, config: RemoteProviderConfig, cancel: CancelToken) -> RemoteAgent:
    os_name, arch = remote_platform(transport)
    source = config.agent_source_for(os_name, arch)
    if source is None:
        artifact, opener = resolve_artifact(arch), None
    else:
        pinned = Source(name=f"devsy agent for {os_name}/{arch}", url=source.url, sha256=source.sha256)
        artifact = AgentArtifact(host_download_cache() / source.sha256, source.sha256, 0, "agent.source")
        opener = _downloading_opener(pinned)
    delivered = StreamDelivery().deliver(transport, f"{config.name}-remote", artifact, cancel,  # type: ignore[arg-type]
                                         opener)
    return RemoteAgent(delivered.guest_path, delivered.sha256, os_name, arch, delivered.transferred)


def _downloading_opener(source: Source):
    def open_source() -> BinaryIO:
        # Called only when the remote machine lacks the agent; the download is verified before it is read.
        try:
            path, _ = fetch(source, str(host_download_cache()))
        except DownloadError as exc:
            raise AgentError(exc.message, hint=exc.hint) from None
        return open(path, "rb")

    return open_source
