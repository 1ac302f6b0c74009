"""A sandbox spec: RunOptions + provider options, validated, and rendered as the `msb run --detach` argument list.

Everything that can be refused is refused while building the spec, before any msb command runs. The argv holds env
values and mount sources; show it only through `shown_argv.redact_argv`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from devsy.driver.base import LABEL_MANAGED, LABEL_MOUNT_POLICY, LABEL_WORKSPACE, RunOptions
from devsy.driver.gpu import plan_gpu
from devsy.driver.microsandbox.image_accounts import MountOwner
from devsy.driver.microsandbox.mounts import MountPlan, WorkspaceMountPolicy, plan_mounts
from devsy.driver.microsandbox.naming import LABEL_CREATED_VOLUMES, created_volumes_label, sandbox_name
from devsy.driver.microsandbox.options import MicrosandboxOptions
from devsy.driver.microsandbox.resources import Resources, effective_resources
from devsy.driver.reuse import MountPolicy
from devsy.errors import ConfigError

MICROSANDBOX = "MicroSandbox"  # how messages name the backend


@dataclass(frozen=True)
class SandboxSpec:
    name: str
    resources: Resources
    mounts: MountPlan
    labels: dict[str, str]
    env: dict[str, str]
    user: str = ""
    entrypoint: str | None = None
    args: list[str] | None = None
    idle_timeout_s: int | None = None
    block_egress: bool = False
    image: str = ""  # what msb boots: a rootfs directory or an msb image reference (set once resolved)
    pull: str = "never"
    created_volumes: list[str] = field(default_factory=list)

    def with_image(self, image: str, *, pull: str) -> SandboxSpec:
        return dataclasses.replace(self, image=image, pull=pull)

    def with_created_volumes(self, names: list[str]) -> SandboxSpec:
        return dataclasses.replace(self, created_volumes=list(names))

    def secrets(self) -> list[str]:
        """Strings that must never appear in a message: env values and mount sources."""
        return [*self.env.values(), *self.mounts.secrets]

    def argv(self) -> list[str]:
        """The arguments after `msb` (a sandbox runs its workload detached; see driver.run for why `run`)."""
        if not self.image:
            raise ValueError("the image of the spec has not been resolved")
        args = ["run", "--detach", "--name", self.name, "--pull", self.pull]
        if self.user:
            args += ["--user", self.user]
        args += self.resources.argv()
        if self.idle_timeout_s:
            args += ["--idle-timeout", f"{self.idle_timeout_s}s"]
        if self.block_egress:
            args += ["--net-default-egress", "deny"]
        labels = dict(self.labels)
        if self.created_volumes:
            labels[LABEL_CREATED_VOLUMES] = created_volumes_label(self.created_volumes)
        for key in sorted(labels):
            args += ["--label", f"{key}={labels[key]}"]
        for key, value in self.env.items():
            args += ["--env", f"{key}={value}"]
        args += self.mounts.argv
        if self.entrypoint is not None:
            args += ["--entrypoint", self.entrypoint]
        args.append(self.image)
        if self.args is not None:
            args += ["--", *self.args]
        return args


def build_spec(workspace_id: str, options: RunOptions, provider: MicrosandboxOptions, *,
               rootfs_dir: bool, owner: MountOwner | None = None) -> SandboxSpec:
    """Validate and assemble the spec of `workspace_id`'s sandbox (the image is resolved separately).

    msb has no GPU and no container settings: a required GPU is refused here (for any caller, e.g. a host speaking
    the protocol to devsy-provider-microsandbox); capAdd, securityOpt, privileged and init have no effect in a
    microVM, and devsy's runner warns about each (provider_table: ignored_settings)."""
    plan_gpu(options.host_requirements.gpu, lambda: False, MICROSANDBOX)
    policy = WorkspaceMountPolicy(provider.stat_virtualization, provider.host_permissions, owner)
    labels = {**options.labels, LABEL_MANAGED: "true", LABEL_WORKSPACE: workspace_id}
    extended = extend_policy(MountPolicy.from_label(labels.get(LABEL_MOUNT_POLICY, "")), policy)
    if extended is not None:  # an unreadable label stays as sent: no reuse will ever match it
        labels[LABEL_MOUNT_POLICY] = extended.to_label()
    _check_keys(labels, "label")
    _check_keys(options.env, "containerEnv variable")
    labels.pop(LABEL_CREATED_VOLUMES, None)  # only the driver says which volumes it created
    entrypoint, args = _command(options)
    return SandboxSpec(
        name=sandbox_name(workspace_id),
        resources=effective_resources(provider, options.host_requirements, rootfs_dir=rootfs_dir),
        mounts=plan_mounts(options.workspace_mount, list(options.mounts), policy),
        labels=labels, env=dict(options.env), user=options.user, entrypoint=entrypoint, args=args,
        idle_timeout_s=provider.inactivity_timeout_s, block_egress=provider.block_egress,
    )


def extend_policy(policy: MountPolicy | None, workspace: WorkspaceMountPolicy) -> MountPolicy | None:
    """The runner's mount policy plus how msb presents the folder (what ReusePreflight compares)."""
    return policy.with_extras(workspace.items()) if policy is not None else None


def _command(options: RunOptions) -> tuple[str | None, list[str] | None]:
    # msb takes the entrypoint's executable as a flag and everything else after `--`.
    if options.entrypoint:
        return options.entrypoint[0], [*options.entrypoint[1:], *(options.cmd or [])]
    return None, list(options.cmd) if options.cmd is not None else None


def _check_keys(mapping: dict[str, str], what: str) -> None:
    for key, value in mapping.items():
        if not key or "=" in key or "\0" in key:
            raise ConfigError(f"a {what} name must be non-empty and contain no '=': {key!r}",
                              hint=f"rename the {what} in devcontainer.json")
        if "\0" in value:  # a command line cannot carry it; the value itself is never shown
            raise ConfigError(f"the value of {what} {key} contains a NUL character",
                              hint=f"remove the NUL from {key}'s value in devcontainer.json")
