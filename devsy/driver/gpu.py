"""What hostRequirements.gpu means on a backend: the one decision every driver and the runner share.

required + no GPU -> ConfigError (raised before anything is created); optional + no GPU -> go on without, with a
warning; otherwise GPUs are requested only when the backend has them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from devsy.driver.base import GpuRequirement
from devsy.errors import ConfigError


@dataclass(frozen=True)
class GpuPlan:
    request: bool  # give the instance the backend's GPUs
    warning: str = ""  # what the user is told when a wanted GPU is not there


def plan_gpu(requirement: GpuRequirement, available: Callable[[], bool], where: str) -> GpuPlan:
    """The plan for `requirement` on `where` (a backend, e.g. "MicroSandbox"); `available` is asked only when a GPU
    is wanted, so a config without one never probes the backend."""
    if requirement in (GpuRequirement.UNSET, GpuRequirement.FALSE):
        return GpuPlan(request=False)
    if available():
        return GpuPlan(request=True)
    if requirement is GpuRequirement.REQUIRED:
        raise ConfigError(
            f"hostRequirements.gpu requires a GPU, but {where} has none",
            hint='set "hostRequirements.gpu" to "optional" (or false) in devcontainer.json, or use a provider '
            "with GPUs (Docker with the NVIDIA container runtime)",
        )
    return GpuPlan(request=False, warning=f'hostRequirements.gpu is "optional" and {where} has no GPU: '
                                          "continuing without one")
