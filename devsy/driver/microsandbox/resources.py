"""Effective VM resources: the provider option wins, then devcontainer.json's hostRequirements, then the default.

hostRequirements memory is rounded up to whole MiB and storage to whole GiB (a devcontainer asking for 1.5 GiB of
disk must not get 1). Every combination msb would reject later (max below effective, a tmpfs root larger than
memory, a root disk for a rootfs directory) is refused here, before any msb command runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from devsy.driver.base import HostRequirements
from devsy.driver.microsandbox.options import MAX_CPUS, UINT32_MAX, MicrosandboxOptions
from devsy.errors import ConfigError, UsageError

DEFAULT_MEMORY_MIB = 2048
RUNTIME_DEFAULT_CPUS = 1  # what msb 0.7 gives a sandbox without -c; only used to check MAX_CPUS against it
MIB, GIB = 1024**2, 1024**3
_UNITS = {"memory": "MiB", "storage": "GiB", "cpus": "CPUs"}


@dataclass(frozen=True)
class Resources:
    memory_mib: int
    cpus: int | None = None
    max_memory_mib: int | None = None
    max_cpus: int | None = None
    storage_gib: int | None = None
    ephemeral: bool = False

    def argv(self) -> list[str]:
        args = ["--memory", str(self.memory_mib)]
        if self.cpus is not None:
            args += ["--cpus", str(self.cpus)]
        if self.max_memory_mib is not None:
            args += ["--max-memory", str(self.max_memory_mib)]
        if self.max_cpus is not None:
            args += ["--max-cpus", str(self.max_cpus)]
        if self.ephemeral:
            args += ["--root-disk", f"tmpfs:{self.storage_gib}G" if self.storage_gib else "tmpfs"]
        elif self.storage_gib is not None:
            args += ["--root-disk", f"{self.storage_gib}G"]
        return args


def effective_resources(options: MicrosandboxOptions, req: HostRequirements, *, rootfs_dir: bool) -> Resources:
    memory = options.memory_mib or _from_host(req.memory_bytes, MIB, "memory", UINT32_MAX) or DEFAULT_MEMORY_MIB
    cpus = options.cpus or _from_host(req.cpus, 1, "cpus", MAX_CPUS)
    storage = options.storage_gib or _from_host(req.storage_bytes, GIB, "storage", UINT32_MAX)
    if options.max_cpus is not None and options.max_cpus < (cpus or RUNTIME_DEFAULT_CPUS):
        raise _combination("MICROSANDBOX_MAX_CPUS must be at least the VM's CPU count "
                           "(MICROSANDBOX_CPUS, else hostRequirements.cpus, else 1)")
    if options.max_memory_mib is not None and options.max_memory_mib < memory:
        raise _combination("MICROSANDBOX_MAX_MEMORY must be at least the VM's memory "
                           f"(MICROSANDBOX_MEMORY, else hostRequirements.memory, else {DEFAULT_MEMORY_MIB} MiB)")
    if options.ephemeral and storage is not None and storage * 1024 > memory:
        raise _combination("with MICROSANDBOX_EPHEMERAL the root disk lives in memory, so the storage "
                           "(MICROSANDBOX_STORAGE, else hostRequirements.storage) must not exceed the VM's memory")
    if rootfs_dir and (options.ephemeral or options.storage_gib is not None):
        name = "MICROSANDBOX_EPHEMERAL" if options.ephemeral else "MICROSANDBOX_STORAGE"
        raise _combination(f"{name} applies to OCI images only; a rootfs directory boots without a root disk")
    return Resources(memory_mib=memory, cpus=cpus, max_memory_mib=options.max_memory_mib,
                     max_cpus=options.max_cpus, storage_gib=None if rootfs_dir else storage,
                     ephemeral=options.ephemeral)


def _from_host(value: int | None, unit: int, key: str, high: int) -> int | None:
    if value is None:
        return None
    rounded = -(-value // unit)  # ceiling division
    if not 1 <= rounded <= high:
        raise ConfigError(
            f'"hostRequirements.{key}" is outside what a MicroSandbox VM supports (1..{high} {_UNITS[key]})',
            hint=f"lower hostRequirements.{key} in devcontainer.json, or override it with the provider option "
            f"MICROSANDBOX_{key.upper()}",
        )
    return rounded


def _combination(message: str) -> UsageError:
    return UsageError(f"invalid microsandbox provider options: {message}",
                      hint="change the named option(s) with --provider-option, or leave them empty for the defaults")
