"""`devsy-provider-microsandbox serve`: the built-in MicroSandbox driver served over Runtime Protocol v1.

Provider options arrive as environment variables named like the built-in provider's options (MICROSANDBOX_MEMORY,
MICROSANDBOX_CPUS, ..., INACTIVITY_TIMEOUT; shared/MICROSANDBOX.md): the host puts `--provider-option KEY=VALUE` into
the provider's environment, which travels through the supervisor's config pipe (never argv or disk). MSB_PATH,
MSB_HOME and MSB_LIBKRUNFW_PATH select the msb binary, its state and its libkrunfw as usual. ReusePreflight and
ON_RUN replacement (RunImage with allow_recreate) are supported.

The sandbox records one mount-policy label: the host's devcontainer-level policy plus how msb presents the folder
(stat virtualization, host permissions). The host compares the devcontainer-level part itself (it knows nothing of
msb), so Find reports that part under the policy label and the msb part under its own label; ReusePreflight checks
both against the recorded label and this process's options.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping

import devsy.no_docker_ssh_transport  # noqa: F401  (first: before anything imports docker)
from devsy.driver.base import LABEL_MOUNT_POLICY, ContainerDetails
from devsy.driver.microsandbox.driver import MicrosandboxDriver
from devsy.driver.microsandbox.mounts import WorkspaceMountPolicy
from devsy.driver.microsandbox.options import OPTION_HELP, parse_microsandbox_options
from devsy.driver.reuse import MountPolicy, PolicyItems, join_items
from devsy.errors import DevsyError
from devsy.process_exit import skip_final_collection
from devsy.runtime.sdk import ProviderInfo, require_serve_command, serve
from devsy.version import devsy_version

PROG = "devsy-provider-microsandbox"
# Where Find reports how msb presents the workspace folder (the part of the recorded policy only msb knows).
LABEL_MOUNT_PRESENTATION = "dev.devsy.mount-presentation"
# The keys msb's presentation adds to the mount policy (mounts.py lists them, the owner's included).
_PRESENTATION_KEYS = WorkspaceMountPolicy.KEYS


def provider_options(environ: Mapping[str, str]) -> dict[str, str]:
    """The documented MicroSandbox provider options present in `environ` (other variables are not options)."""
    return {name: environ[name] for name in OPTION_HELP if name in environ}


def split_policy(policy: MountPolicy) -> tuple[MountPolicy, PolicyItems]:
    """(devcontainer-level policy, msb presentation) of a recorded mount policy."""
    return policy.split_extras(_PRESENTATION_KEYS)


class MicrosandboxProviderDriver(MicrosandboxDriver):
    """MicrosandboxDriver plus the Preflight hook the SDK calls, and the host-facing split of the policy label."""

    def preflight(self, disable_auto_start: bool = False) -> None:
        self.client  # noqa: B018 - finds msb and checks its version: BackendUnavailable with an install hint

    def find(self, workspace_id: str) -> ContainerDetails | None:
        found = super().find(workspace_id)
        recorded = MountPolicy.from_label(found.labels.get(LABEL_MOUNT_POLICY, "")) if found is not None else None
        if found is None or recorded is None:  # none, or unreadable: reported as recorded (the host refuses it)
            return found
        base, presentation = split_policy(recorded)
        labels = {**found.labels, LABEL_MOUNT_POLICY: base.to_label()}
        if presentation:
            labels[LABEL_MOUNT_PRESENTATION] = join_items(presentation)
        return dataclasses.replace(found, labels=labels)

    def reuse_preflight(self, workspace_id: str, remote_user: str, mount_policy: MountPolicy | None) -> None:
        # The SDK derives `mount_policy` from what Find reports (the devcontainer-level part); the built-in check
        # appends this process's presentation and compares with the recorded label, so a changed
        # MICROSANDBOX_WORKSPACE_* option is refused like a changed owner.
        base = split_policy(mount_policy)[0] if mount_policy is not None else None
        super().reuse_preflight(workspace_id, remote_user, base)


def main(argv: list[str] | None = None) -> int:
    rest = require_serve_command(PROG, sys.argv[1:] if argv is None else argv)
    if rest:
        print(f"{PROG}: unexpected arguments; options come from the environment ({', '.join(OPTION_HELP)})",
              file=sys.stderr)
        return 2
    try:
        driver = MicrosandboxProviderDriver(parse_microsandbox_options(provider_options(os.environ)))
    except DevsyError as exc:  # an invalid option: named in the message, its value never shown
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    # requires_workspace_chown (PROTOCOL.md Capabilities 3) asks the host's agent to chown the workspace to the
    # remote user after boot. Not needed: the driver reads the user's uid:gid from the image and msb presents the
    # folder with that owner (`--mount-dir ...,uid=U,gid=G`). A chown would also be wrong here: under host-perms=mirror
    # it would change the owner of the developer's files on the host. (The Go provider says true because its driver
    # predates the owner mapping.)
    info = ProviderInfo(driver_name="microsandbox", driver_version=devsy_version(), runtime_name="microsandbox",
                        runtime_version=_msb_version(driver), recreate_on_run=True, requires_workspace_chown=False)
    code = serve(driver, info)
    skip_final_collection()  # this process ends now, and its host waits for that
    return code


def _msb_version(driver: MicrosandboxDriver) -> str:
    try:
        return driver.client.binary.version_text
    except DevsyError:  # informational only; Preflight and every RPC report a missing msb properly
        return ""


if __name__ == "__main__":
    sys.exit(main())
