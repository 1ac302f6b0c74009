"""Turning RunOptions into the keyword arguments of `containers.create`, and a container back into ContainerDetails."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from devsy.driver.base import (
    LABEL_MANAGED,
    LABEL_WORKSPACE,
    ContainerDetails,
    InstanceMount,
    InstanceStatus,
    Mount,
    MountType,
    RunOptions,
)
from devsy.driver.docker.options import DockerOptions
from devsy.driver.gpu import GpuPlan, plan_gpu
from devsy.driver.host_minimums import HostCapacity

if TYPE_CHECKING:  # the SDK is imported when a container is created, not by a command that only looks (engine.py)
    import docker.types

# The engine's runtimes that give containers GPUs (what the devcontainers CLI looks for in `docker info`).
GPU_RUNTIMES = ("nvidia",)
ENGINE = "this Docker engine"


def container_name(workspace_id: str) -> str:
    return f"devsy-{workspace_id}"


def owned_labels(workspace_id: str, extra: dict[str, str]) -> dict[str, str]:
    return {**extra, LABEL_MANAGED: "true", LABEL_WORKSPACE: workspace_id}


def engine_capacity(info: Mapping[str, Any]) -> HostCapacity:
    """What the engine's machine (its `docker info` NCPU and MemTotal) can give a container."""
    return HostCapacity(ENGINE, info.get("NCPU"), info.get("MemTotal"))


def engine_has_gpu(info: Mapping[str, Any]) -> bool:
    """Whether the engine (its `docker info`) has a GPU runtime."""
    return any(name in (info.get("Runtimes") or {}) for name in GPU_RUNTIMES)


def gpu_device_requests() -> list[docker.types.DeviceRequest]:
    """Every GPU of the engine, as `docker run --gpus all` asks for them (the devcontainers CLI's choice)."""
    import docker.types  # noqa: PLC0415 - see TYPE_CHECKING above

    return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]


def create_kwargs(workspace_id: str, options: RunOptions, provider: DockerOptions,
                  engine_info: Callable[[], Mapping[str, Any]] = dict) -> dict[str, Any]:
    """Keyword arguments for `client.containers.create` (env values stay inside; never log this dict).

    `engine_info` (the engine's `docker info`) is read only when the config wants a GPU; a required GPU the engine
    cannot give is a ConfigError here, before anything is created."""
    gpu = plan_gpu(options.host_requirements.gpu, lambda: engine_has_gpu(engine_info()), ENGINE)
    mounts: list[docker.types.Mount] = []
    tmpfs: dict[str, str] = {}
    for mount in ([options.workspace_mount] if options.workspace_mount else []) + list(options.mounts):
        if mount.type is MountType.TMPFS:
            tmpfs[mount.target] = "ro" if mount.read_only else ""
        else:
            mounts.append(_docker_mount(mount))
    kwargs: dict[str, Any] = {
        "image": options.image,
        "name": container_name(workspace_id),
        "labels": owned_labels(workspace_id, options.labels),
        "environment": dict(options.env),
        "mounts": mounts,
        "tmpfs": tmpfs or None,
        "user": options.user or None,
        "detach": True,
        "stdin_open": False,
        "tty": False,
    }
    if options.entrypoint is not None:
        kwargs["entrypoint"] = options.entrypoint
    if options.cmd is not None:
        kwargs["command"] = options.cmd
    if provider.network_mode != "default":
        kwargs["network_mode"] = provider.network_mode
    # hostRequirements are minimums the host must offer (checked in DockerDriver.run), never caps: the spec's
    # "cpus": 4 asks for a machine with 4 CPUs, not a container held to 4.
    kwargs.update(_security_kwargs(options, gpu))
    kwargs.update(_host_kwargs(options))
    return kwargs


def _host_kwargs(options: RunOptions) -> dict[str, Any]:
    """runArgs --add-host, --device and --shm-size, as `docker run` applies them."""
    kwargs: dict[str, Any] = {}
    if options.extra_hosts:
        kwargs["extra_hosts"] = list(options.extra_hosts)
    if options.devices:
        kwargs["devices"] = list(options.devices)
    if options.shm_size_bytes is not None:
        kwargs["shm_size"] = options.shm_size_bytes
    return kwargs


def _security_kwargs(options: RunOptions, gpu: GpuPlan) -> dict[str, Any]:
    """capAdd, securityOpt, privileged, init and GPUs as `docker run` --cap-add/--security-opt/--privileged/--init/
    --gpus all apply them; a setting devcontainer.json does not write keeps the engine's default."""
    kwargs: dict[str, Any] = {}
    if options.cap_add:
        kwargs["cap_add"] = list(options.cap_add)
    if options.security_opt:
        kwargs["security_opt"] = list(options.security_opt)
    if options.privileged is not None:
        kwargs["privileged"] = options.privileged
    if options.init is not None:
        kwargs["init"] = options.init
    if gpu.request:
        kwargs["device_requests"] = gpu_device_requests()
    return kwargs


def _docker_mount(mount: Mount) -> docker.types.Mount:
    import docker.types  # noqa: PLC0415 - see TYPE_CHECKING above

    return docker.types.Mount(
        target=mount.target,
        source=mount.source,
        type="bind" if mount.type is MountType.BIND else "volume",
        read_only=mount.read_only,
    )


def details(attrs: Mapping[str, Any]) -> ContainerDetails:
    """ContainerDetails from a container's inspect (`docker inspect`, an SDK container's attrs)."""
    state = attrs.get("State", {})
    config = attrs.get("Config", {}) or {}
    return ContainerDetails(
        id=attrs["Id"],
        created_at=attrs.get("Created", ""),
        status=InstanceStatus.RUNNING if state.get("Running") else InstanceStatus.STOPPED,
        labels=dict(config.get("Labels") or {}),
        mounts=[
            *(InstanceMount(type=m.get("Type", ""), source=m.get("Source", "") or m.get("Name", ""),
                            destination=m.get("Destination", ""))
              for m in attrs.get("Mounts", []) or []),
            # --tmpfs mounts are not among the engine's Mounts
            *(InstanceMount(type="tmpfs", source="", destination=target)
              for target in (attrs.get("HostConfig", {}) or {}).get("Tmpfs") or {}),
        ],
        user=config.get("User", "") or "",
        working_dir=config.get("WorkingDir", "") or "",
        started_at=state.get("StartedAt", "") or "",
        host_root=host_root(attrs),
    )


def host_root(attrs: Mapping[str, Any]) -> str:
    """The container's overlay root as mounted on this host (overlay2 storage, a local engine, devsy allowed to read
    it); "" otherwise. Only a running container has it mounted. An engine in a mount namespace of its own (rootless,
    snap) leaves an empty directory here, not a mount: that is no view."""
    root = ((attrs.get("GraphDriver", {}) or {}).get("Data", {}) or {}).get("MergedDir") or ""
    return root if root and os.path.ismount(root) else ""
