"""Translation between the Driver seam's dataclasses and the protocol's messages (used by SDK and host alike)."""

from __future__ import annotations

from devsy.driver.base import Capabilities, ContainerDetails, GpuRequirement, HostRequirements, InstanceMount, \
    InstanceStatus, Mount, MountType, RunOptions
from devsy.errors import ConfigError
from devsy.runtime.wire.errors import RuntimeProtocolError
from devsy.runtime.v1 import runtime_pb2 as pb

MOUNT_TYPE_TO_PB = {MountType.BIND: pb.MOUNT_TYPE_BIND, MountType.VOLUME: pb.MOUNT_TYPE_VOLUME,
                    MountType.TMPFS: pb.MOUNT_TYPE_TMPFS}
MOUNT_TYPE_FROM_PB = {v: k for k, v in MOUNT_TYPE_TO_PB.items()}
GPU_TO_PB = {GpuRequirement.UNSET: pb.GPU_UNSPECIFIED, GpuRequirement.FALSE: pb.GPU_FALSE,
             GpuRequirement.OPTIONAL: pb.GPU_OPTIONAL, GpuRequirement.REQUIRED: pb.GPU_REQUIRED}
GPU_FROM_PB = {v: k for k, v in GPU_TO_PB.items()}
# The widest value each HostRequirements field carries (int32 cpus, uint64 sizes, as in the Go SDK's proto).
_WIRE_MAX = {"cpus": 2**31 - 1, "memory": 2**64 - 1, "storage": 2**64 - 1}
_UNIT = {"cpus": "CPUs", "memory": "bytes", "storage": "bytes"}


def details_to_pb(details: ContainerDetails) -> pb.ContainerDetails:
    return pb.ContainerDetails(
        id=details.id, created_at=details.created_at,
        state=pb.ContainerState(status=details.status.value, started_at=details.started_at),
        config=pb.ContainerConfig(labels=details.labels, working_dir=details.working_dir, user=details.user),
        mounts=[pb.ContainerMount(type=m.type, source=m.source, destination=m.destination) for m in details.mounts],
    )


def details_from_pb(message: pb.ContainerDetails, provider: str) -> ContainerDetails:
    try:
        status = InstanceStatus(message.state.status)
    except ValueError:
        raise RuntimeProtocolError(f"provider {provider} reported container status {message.state.status!r}; the "
                                   "protocol allows 'running' or 'stopped'",
                                   hint="report this to the provider's authors") from None
    if not message.id:
        raise RuntimeProtocolError(f"provider {provider} reported a container without an id",
                                   hint="report this to the provider's authors")
    return ContainerDetails(
        id=message.id, created_at=message.created_at, status=status, labels=dict(message.config.labels),
        mounts=[InstanceMount(type=m.type, source=m.source, destination=m.destination) for m in message.mounts],
        user=message.config.user, working_dir=message.config.working_dir, started_at=message.state.started_at,
    )


def mount_to_pb(mount: Mount) -> pb.Mount:
    return pb.Mount(type=MOUNT_TYPE_TO_PB[mount.type], source=mount.source, target=mount.target,
                    read_only=mount.read_only)


def run_request(workspace_id: str, options: RunOptions) -> pb.RunImageRequest:
    """The RunImage request for `options`. An entrypoint list travels as its first word plus leading args."""
    entrypoint, args = "", list(options.cmd or [])
    if options.entrypoint:
        entrypoint, args = options.entrypoint[0], [*options.entrypoint[1:], *args]
    req = options.host_requirements
    request = pb.RunImageRequest(
        workspace_id=workspace_id, image=options.image, image_built_locally=options.image_built_locally,
        user=options.user, entrypoint=entrypoint, args=args, environment=options.env,
        labels=[f"{k}={v}" for k, v in sorted(options.labels.items())],
        mounts=[mount_to_pb(m) for m in options.mounts],
        host_requirements=pb.HostRequirements(cpus=_wire(req.cpus, "cpus"),
                                              memory_bytes=_wire(req.memory_bytes, "memory"),
                                              storage_bytes=_wire(req.storage_bytes, "storage"),
                                              gpu=pb.GpuRequirement(value=GPU_TO_PB[req.gpu])),
        remote_user=options.remote_user, allow_recreate=options.allow_recreate,
        cap_add=options.cap_add, security_opt=options.security_opt,
    )
    # `optional bool`: left unset when devcontainer.json does not say, so the provider's default applies.
    if options.privileged is not None:
        request.privileged = options.privileged
    if options.init is not None:
        request.init = options.init
    if options.workspace_mount is not None:
        request.workspace_mount.CopyFrom(mount_to_pb(options.workspace_mount))
    return request


def _wire(value: int | None, key: str) -> int:
    """A hostRequirements value as the protocol carries it (0 = none); one the wire cannot carry is the config's
    fault, named, rather than protobuf's ValueError. Whether the backend can honour it is the provider's to say."""
    if value is not None and value > _WIRE_MAX[key]:
        raise ConfigError(f'"hostRequirements.{key}" ({value} {_UNIT[key]}) is more than Runtime Protocol v1 can '
                          f"carry (at most {_WIRE_MAX[key]} {_UNIT[key]})",
                          hint=f"lower hostRequirements.{key} in devcontainer.json")
    return value or 0


def run_options(request: pb.RunImageRequest) -> RunOptions:
    """RunOptions of an already validated request (see sdk.validate)."""
    labels = dict(label.split("=", 1) for label in request.labels)
    req = request.host_requirements
    options = RunOptions(
        image=request.image, user=request.user, remote_user=request.remote_user or request.user or "root",
        entrypoint=[request.entrypoint] if request.entrypoint else None, cmd=list(request.args) or None,
        env=dict(request.environment), labels=labels,
        mounts=[_mount(m) for m in request.mounts],
        host_requirements=HostRequirements(cpus=req.cpus or None, memory_bytes=req.memory_bytes or None,
                                           storage_bytes=req.storage_bytes or None,
                                           gpu=GPU_FROM_PB.get(req.gpu.value, GpuRequirement.UNSET)),
        image_built_locally=request.image_built_locally, allow_recreate=request.allow_recreate,
        cap_add=list(request.cap_add), security_opt=list(request.security_opt),
        privileged=request.privileged if request.HasField("privileged") else None,
        init=request.init if request.HasField("init") else None,
    )
    if request.HasField("workspace_mount"):
        options.workspace_mount = _mount(request.workspace_mount)
    return options


def _mount(message: pb.Mount) -> Mount:
    return Mount(type=MOUNT_TYPE_FROM_PB[message.type], target=message.target, source=message.source,
                 read_only=message.read_only)


def capabilities_from_pb(message: pb.Capabilities) -> Capabilities:
    return Capabilities(mount_types=tuple(MOUNT_TYPE_FROM_PB[t] for t in message.mount_types),
                        logs=message.logs, reuse_preflight=message.reuse_preflight)
