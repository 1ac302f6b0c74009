"""Request validation, before a driver sees anything: a rejected request changes nothing."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from devsy.driver.base import Capabilities, RunOptions
from devsy.runtime.wire.convert import MOUNT_TYPE_FROM_PB, run_options
from devsy.runtime.wire.errors import InvalidArgument, Unsupported
from devsy.runtime.v1 import runtime_pb2 as pb

_WORKSPACE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_ENV_KEY = re.compile(r"[^=\x00]+")


def workspace_id(value: str) -> str:
    if not _WORKSPACE_ID.fullmatch(value):
        raise InvalidArgument("the workspace id is empty or not 1-128 of A-Z a-z 0-9 _ . - (starting with a letter "
                              "or digit)", hint="pass the id devsy derived for the workspace")
    return value


def _env(env: dict[str, str], what: str) -> None:
    # Only keys are named: values are secrets.
    for key, value in env.items():
        if not _ENV_KEY.fullmatch(key):
            raise InvalidArgument(f"{what} has an invalid variable name {key!r}", hint="names must be non-empty "
                                  "and contain no '=' or NUL")
        if "\x00" in value:
            raise InvalidArgument(f"{what} variable {key} contains a NUL byte", hint="remove the NUL byte")


def _mount(mount: pb.Mount, caps: Capabilities, what: str) -> None:
    if mount.type not in MOUNT_TYPE_FROM_PB:
        raise InvalidArgument(f"{what} has mount type {mount.type}; use BIND, VOLUME or TMPFS",
                              hint="set the mount's type")
    mount_type = MOUNT_TYPE_FROM_PB[mount.type]
    if mount_type not in caps.mount_types:
        raise Unsupported(f"{what} is a {mount_type.value} mount, which this runtime does not offer",
                          hint=f"use one of: {', '.join(t.value for t in caps.mount_types)}")
    if not mount.target.startswith("/") or posixpath.normpath(mount.target) == "/":
        raise InvalidArgument(f"{what} target {mount.target!r} is not an absolute path below /",
                              hint="mount targets are absolute paths inside the workspace")
    if mount_type.value == "bind" and not mount.source.startswith("/"):
        # The source is never echoed: it may be a secret.
        raise InvalidArgument(f"{what} (target {mount.target}) is a bind mount without an absolute source path",
                              hint="bind mounts need an absolute host path as source")
    if mount.options:
        raise Unsupported(f"{what} (target {mount.target}) has mount options, which this runtime does not support",
                          hint="remove the options")


def run_request(request: pb.RunImageRequest, caps: Capabilities, architecture: Callable[[], str]) -> RunOptions:
    """RunOptions of a valid RunImage request; InvalidArgument or Unsupported otherwise."""
    workspace_id(request.workspace_id)
    if not request.image:
        raise InvalidArgument("RunImage names no image", hint="pass the image to run")
    for label in request.labels:
        if "=" not in label or label.startswith("="):
            raise InvalidArgument(f"label {label.split('=')[0]!r} is not in key=value form",
                                  hint="pass labels as key=value")
    _env(dict(request.environment), "the container environment")
    if request.HasField("workspace_mount"):
        _mount(request.workspace_mount, caps, "the workspace mount")
    for index, mount in enumerate(request.mounts):
        _mount(mount, caps, f"mount #{index + 1}")
    # cap_add, security_opt, privileged, init and hostRequirements.gpu reach only a driver that acts on them
    # (Capabilities.container_settings: it applies them, or refuses/warns itself, devsy/driver/gpu.py); any other
    # driver would ignore them silently, so they are refused here. User-namespace mapping no SDK driver offers.
    settings = () if caps.container_settings else (
        ("cap_add", request.cap_add), ("security_opt", request.security_opt),
        ("privileged", request.HasField("privileged") and request.privileged),
        ("init", request.HasField("init") and request.init),
        ("a required GPU", request.host_requirements.gpu.value == pb.GPU_REQUIRED))
    unsupported = [name for name, value in (
        *settings, ("userns", request.userns), ("uid_map", request.uid_map), ("gid_map", request.gid_map)) if value]
    if unsupported:
        raise Unsupported(f"this runtime does not support {', '.join(unsupported)}",
                          hint="remove these settings from the devcontainer configuration")
    if request.platform and request.platform != f"linux/{architecture()}":
        raise Unsupported(f"platform {request.platform!r} differs from this runtime's linux/{architecture()}",
                          hint=f"use an image for linux/{architecture()}")
    req = request.host_requirements
    if req.gpu.value not in pb.GpuRequirementValue.values():
        raise InvalidArgument(f"hostRequirements.gpu has an unknown value {req.gpu.value}",
                              hint="send GPU_UNSPECIFIED, GPU_FALSE, GPU_OPTIONAL or GPU_REQUIRED")
    # memory_bytes and storage_bytes are uint64 (every value is a size); whether the backend can honour one is the
    # driver's to say (an INVALID_ARGUMENT naming the field, e.g. MicroSandbox's MiB/GiB as uint32).
    if req.cpus < 0:
        raise InvalidArgument(f"hostRequirements.cpus is negative ({req.cpus})", hint="send 0 (no requirement) or "
                              "a positive CPU count")
    return run_options(request)


def exec_start(start: pb.ExecStart) -> None:
    workspace_id(start.workspace_id)
    if not start.argv or not start.argv[0]:
        raise InvalidArgument("Exec has an empty argv", hint="pass the command to run")
    if start.tty:
        raise Unsupported("this runtime does not offer a TTY for Exec", hint="run the command without a TTY")
    _env(dict(start.environment), "the command environment")
