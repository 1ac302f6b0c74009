"""The Driver seam: the one interface between the runner and every backend.

Built-in drivers (Docker, MicroSandbox) and the external-provider adapter all implement `Driver`. The types here
mirror Runtime Protocol v1 (shared/PROTOCOL.md) so that serving a driver over the protocol is a thin translation.

Lifecycle semantics (all drivers): `find` returns None for plain absence; `start` on a running instance and `stop`
on a stopped one succeed; `delete` of a missing instance succeeds; `start` of a missing one raises NotFound;
`run` on an existing instance raises AlreadyExists.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import Enum
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO, Protocol, runtime_checkable

if TYPE_CHECKING:  # reuse.py builds on the labels defined here
    from devsy.driver.reuse import MountPolicy

# Label namespace every devsy-created backend object carries.
LABEL_PREFIX = "dev.devsy."  # every label devsy sets starts so
LABEL_MANAGED = "dev.devsy.managed"
LABEL_WORKSPACE = "dev.devsy.workspace"
LABEL_WORKSPACE_UID = "dev.devsy.workspace-uid"
LABEL_REMOTE_USER = "dev.devsy.remote-user"
LABEL_MOUNT_POLICY = "dev.devsy.mount-policy"
# Names the create attempt that made an instance; the record keeps it until that instance's create hooks succeeded.
LABEL_CREATE_ATTEMPT = "dev.devsy.create-attempt"


class MountType(str, Enum):
    BIND = "bind"
    VOLUME = "volume"
    TMPFS = "tmpfs"


class InstanceStatus(str, Enum):
    RUNNING = "running"
    STOPPED = "stopped"


@dataclass(frozen=True)
class Mount:
    """One mount. `source` may be a secret (a host path or volume name): never log it."""

    type: MountType
    target: str
    source: str = ""
    read_only: bool = False


class GpuRequirement(str, Enum):
    """hostRequirements.gpu; UNSET (not written) is kept apart from FALSE (written `false`), as on the wire."""

    UNSET = "unset"
    FALSE = "false"
    OPTIONAL = "optional"  # use GPUs if the backend has them, else go on without (with a warning)
    REQUIRED = "required"  # `true`, or the spec's object form: refuse before anything is created if there are none


@dataclass(frozen=True)
class HostRequirements:
    cpus: int | None = None
    memory_bytes: int | None = None
    storage_bytes: int | None = None
    gpu: GpuRequirement = GpuRequirement.UNSET


@dataclass
class RunOptions:
    """Everything needed to create an instance. `env` values are secrets: never log them."""

    image: str
    user: str = ""
    remote_user: str = ""
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    workspace_mount: Mount | None = None
    mounts: list[Mount] = field(default_factory=list)
    host_requirements: HostRequirements = field(default_factory=HostRequirements)
    image_built_locally: bool = False
    allow_recreate: bool = False
    # devcontainer.json capAdd, securityOpt, privileged, init. None = not written (the backend's default), which
    # the protocol's `optional bool` keeps apart from an explicit false.
    cap_add: list[str] = field(default_factory=list)
    security_opt: list[str] = field(default_factory=list)
    privileged: bool | None = None
    init: bool | None = None
    # runArgs --add-host (HOST:IP), --device, --shm-size. The Runtime Protocol has no fields for them: only the
    # built-in Docker driver applies them, and `devsy up` refuses them for every other provider.
    extra_hosts: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    shm_size_bytes: int | None = None


@dataclass(frozen=True)
class InstanceMount:
    type: str
    source: str
    destination: str


@dataclass
class ContainerDetails:
    id: str
    created_at: str
    status: InstanceStatus
    labels: dict[str, str] = field(default_factory=dict)
    mounts: list[InstanceMount] = field(default_factory=list)
    user: str = ""
    working_dir: str = ""
    started_at: str = ""
    # The instance's root filesystem as this host sees it, where it can ("" = it cannot: a remote engine, a microVM,
    # a provider); what `mounts` put over it is not in it. Local only: never on the wire.
    host_root: str = ""

    @property
    def running(self) -> bool:
        return self.status is InstanceStatus.RUNNING


class CancelToken:
    """A cancellation flag that can also notify: `on_cancel` callbacks run (once) in the thread that cancels."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def is_cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Register `callback`; it runs now if already cancelled. Returns a function that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._discard(callback)
        callback()
        return lambda: None

    def _discard(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


@dataclass
class ExecRequest:
    """A command in the instance. Streams carry raw bytes; `cancel` set from any thread kills the command's tree.

    `stdin` is read until EOF (None = empty input). `close_stdin` says the driver owns stdin and should close it on
    cancellation so a blocked reader ends; a caller-owned stream is never closed.
    """

    argv: list[str]
    stdout: BinaryIO
    stderr: BinaryIO
    stdin: BinaryIO | None = None
    user: str = ""
    workdir: str = ""
    env: dict[str, str] = field(default_factory=dict)
    cancel: CancelToken = field(default_factory=CancelToken)
    owns_stdin: bool = False


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    signal: str = ""


@dataclass(frozen=True)
class Capabilities:
    mount_types: tuple[MountType, ...] = (MountType.BIND, MountType.VOLUME, MountType.TMPFS)
    logs: bool = True
    # Whether a provider answers the ReusePreflight RPC (API 1.2). Only the external driver reads it: the runner asks
    # every driver's `reuse_preflight`, which checks labels itself when the provider has no check of its own.
    reuse_preflight: bool = True
    # Whether the driver acts on capAdd, securityOpt, privileged, init and a GPU requirement (applies them, or refuses
    # or warns itself). Not on the wire: the provider SDK refuses those settings for a driver that does not.
    container_settings: bool = False


@runtime_checkable
class Driver(Protocol):
    """A backend. Every method is bounded and raises a subclass of devsy.errors.DriverError on failure."""

    name: str

    def open_backend(self) -> None:
        """Reach the backend now (start a provider, find msb, ping the engine) so that one that cannot be used fails
        before any state is touched; make_driver calls it for the providers whose row says so."""
        ...

    def capabilities(self) -> Capabilities: ...

    def find(self, workspace_id: str) -> ContainerDetails | None: ...

    def run(self, workspace_id: str, options: RunOptions) -> ContainerDetails: ...

    def start(self, workspace_id: str) -> None: ...

    def stop(self, workspace_id: str) -> None: ...

    def delete(self, workspace_id: str) -> None: ...

    def exec(self, workspace_id: str, request: ExecRequest) -> ExecResult: ...

    def logs(self, workspace_id: str, out: BinaryIO) -> None: ...

    def target_architecture(self, workspace_id: str) -> str: ...

    def reuse_preflight(self, workspace_id: str, remote_user: str, mount_policy: MountPolicy | None) -> None:
        """Read-only: raise RecreateRequired unless the instance may be reused for this identity and policy. The
        runner asks every driver before reusing; each decides how (labels, or a provider's own check)."""
        ...
