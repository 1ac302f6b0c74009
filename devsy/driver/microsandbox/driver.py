"""The built-in MicroSandbox driver: one microVM (an msb sandbox named `devsy-<id>`) per workspace.

Why `msb run --detach` and not `msb create`: only `run` starts the workload (the image's command, or the keep-alive
command the runner asks for). Its catch: on an existing name msb 0.7 *starts* that sandbox instead of refusing, so
absence is checked first (the runner holds the workspace lock, so nothing else creates this name meanwhile).
"""

from __future__ import annotations

import json
import platform
from typing import BinaryIO

from devsy.arch import normalize_arch
from devsy.driver.base import (
    LABEL_MANAGED,
    LABEL_WORKSPACE,
    Capabilities,
    ContainerDetails,
    ExecRequest,
    ExecResult,
    MountType,
    RunOptions,
)
from devsy.driver.microsandbox.details import RUNNING, SandboxState, parse_inspect
from devsy.driver.microsandbox.diagnostics import boot_failed
from devsy.driver.microsandbox.exec_stream import run_exec
from devsy.driver.microsandbox.images import is_rootfs_dir, resolve_image
from devsy.driver.microsandbox.locate import locate_msb
from devsy.driver.microsandbox.image_accounts import MountOwner
from devsy.driver.microsandbox.image_owner import workspace_owner
from devsy.driver.microsandbox.mounts import WorkspaceMountPolicy, recorded_owner
from devsy.driver.microsandbox.msb import MsbClient, sandbox_missing
from devsy.driver.microsandbox.naming import LABEL_CREATED_VOLUMES, parse_created_volumes, sandbox_name
from devsy.driver.microsandbox.options import MicrosandboxOptions
from devsy.driver.microsandbox.spec import SandboxSpec, build_spec, extend_policy
from devsy.driver.microsandbox.volumes import ensure_volumes, remove_volumes
from devsy.driver.reuse import MountPolicy, Ownership, check_reuse
from devsy.errors import AlreadyExists, DriverError, NotFound
from devsy.runtime.wire.errors import PreconditionFailed

QUICK_TIMEOUT_S = 60.0  # inspect, rm, logs: no VM work
BOOT_TIMEOUT_S = 300.0  # run/start: root disk preparation plus boot
STOP_GRACE_S = 10


class MicrosandboxDriver:
    name = "microsandbox"

    def __init__(self, options: MicrosandboxOptions | None = None, client: MsbClient | None = None) -> None:
        self.options = options or MicrosandboxOptions()
        self._client = client

    def open_backend(self) -> None:
        """Find msb and check its version now (a failure raises before any state is touched)."""
        self.client  # noqa: B018

    @property
    def client(self) -> MsbClient:
        """The msb client; finding msb and checking its version happen here (BackendUnavailable on failure)."""
        if self._client is None:
            self._client = MsbClient(locate_msb())
        return self._client

    def capabilities(self) -> Capabilities:
        return Capabilities(mount_types=(MountType.BIND, MountType.VOLUME, MountType.TMPFS), logs=True,
                            reuse_preflight=True, container_settings=True)

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def _inspect(self, workspace_id: str) -> SandboxState | None:
        name = sandbox_name(workspace_id)
        args = ["inspect", name, "--format", "json"]
        action = f"inspecting the sandbox of workspace {workspace_id}"
        result = self.client.run(args, action=action, timeout=QUICK_TIMEOUT_S, check=False)
        if result.returncode != 0:
            if sandbox_missing(result.stderr, name):
                return None
            raise self.client.failure(args, result, action=action)
        try:
            state = parse_inspect(json.loads(result.stdout))
        except (ValueError, AttributeError) as exc:
            raise DriverError(f"{action}: `msb inspect` printed no JSON object",
                              hint="check `msb --version` (devsy needs 0.7.11 or newer)") from exc
        labels = state.details.labels
        if labels.get(LABEL_MANAGED) != "true" or labels.get(LABEL_WORKSPACE) != workspace_id:
            raise DriverError(f"a sandbox named {name} exists but devsy did not create it for workspace "
                              f"{workspace_id}; devsy leaves it alone",
                              hint=f"remove it (`msb rm -f {name}`) if it is not needed, or use another workspace id")
        return state

    def _require(self, workspace_id: str) -> SandboxState:
        state = self._inspect(workspace_id)
        if state is None:
            raise NotFound(f"workspace {workspace_id} has no sandbox",
                           hint=f"run `devsy up` to create it, or `devsy delete {workspace_id}` to forget it")
        return state

    def find(self, workspace_id: str) -> ContainerDetails | None:
        state = self._inspect(workspace_id)
        return state.details if state is not None else None

    def run(self, workspace_id: str, options: RunOptions) -> ContainerDetails:
        """Create and boot the sandbox. On failure, removes what this call created (sandbox, volumes)."""
        build_spec(workspace_id, options, self.options, rootfs_dir=is_rootfs_dir(options.image))  # refuse early
        existing = self._inspect(workspace_id)
        if existing is not None and not options.allow_recreate:
            raise AlreadyExists(f"workspace {workspace_id} already has a sandbox",
                                hint="use `devsy up --recreate` to replace it")
        # Read from the image before anything is loaded, pulled or created: an unknown user fails with nothing made.
        spec = build_spec(workspace_id, options, self.options, rootfs_dir=is_rootfs_dir(options.image),
                          owner=self._workspace_owner(options))
        image = resolve_image(self.client, options.image, built_locally=options.image_built_locally)
        spec = spec.with_image(image.ref, pull=image.pull)
        carried: list[str] = []
        if existing is not None:
            # Replacement: everything was validated and the image is ready; only now is the old VM removed. The
            # volumes it created stay (they hold data) and stay owned, so a later delete still removes them.
            carried = parse_created_volumes(existing.details.labels.get(LABEL_CREATED_VOLUMES, ""))
            self._remove_sandbox(spec.name, workspace_id, running=existing.msb_status == RUNNING)
        created: list[str] = []
        try:
            ensure_volumes(self.client, spec.mounts.named_volumes, created)
            spec = spec.with_created_volumes(carried + [v for v in created if v not in carried])
            self._launch(workspace_id, spec)
            return self._require(workspace_id).details
        except BaseException as exc:
            self._undo_run(workspace_id, spec.name, created, exc)
            raise

    def _workspace_owner(self, options: RunOptions) -> MountOwner | None:
        """Who owns the workspace folder inside the VM (remote_user, else user, else root), from the image."""
        policy = WorkspaceMountPolicy(self.options.stat_virtualization, self.options.host_permissions)
        if options.workspace_mount is None or options.workspace_mount.type is not MountType.BIND \
                or not policy.maps_owner:
            return None  # no folder to present, or msb shows host metadata as it is (stat-virt=off)
        identity = options.remote_user or options.user or "root"
        return workspace_owner(identity, options.image, built_locally=options.image_built_locally)

    def _launch(self, workspace_id: str, spec: SandboxSpec) -> None:
        args = spec.argv()
        action = f"creating the sandbox of workspace {workspace_id}"
        result = self.client.run(args, action=action, timeout=BOOT_TIMEOUT_S, secrets=spec.secrets(), check=False)
        if result.returncode == 0:
            return
        if self._exists(spec.name):  # created but not booted: a boot failure, explained from its own log
            raise boot_failed(self.client, spec.name, f"the microVM of workspace {workspace_id}", result.stderr,
                              spec.secrets())
        raise self.client.failure(args, result, action=action, secrets=spec.secrets())

    def _undo_run(self, workspace_id: str, name: str, created_volumes: list[str], exc: BaseException) -> None:
        problems: list[str] = []
        try:
            if self._exists(name):
                self._remove_sandbox(name, workspace_id, running=False)  # rm falls back to rm --force
        except DriverError as error:
            problems.append(f"remove the sandbox: {error.message}")
        problems += remove_volumes(self.client, created_volumes)
        if problems:
            exc.add_note("cleanup of this attempt failed for:\n" + "\n".join(f"  {p}" for p in problems))

    def _exists(self, name: str) -> bool:
        result = self.client.run(["inspect", name, "--format", "json"], action="checking for the sandbox",
                                 timeout=QUICK_TIMEOUT_S, check=False)
        if result.returncode == 0:
            return True
        if sandbox_missing(result.stderr, name):
            return False
        raise self.client.failure(["inspect", name], result, action="checking for the sandbox")

    def start(self, workspace_id: str) -> None:
        state = self._require(workspace_id)
        if state.details.running:
            return
        name = state.name
        result = self.client.run(["start", name], action=f"starting workspace {workspace_id}",
                                 timeout=BOOT_TIMEOUT_S, missing=name, check=False)
        if result.returncode != 0:
            # The existing VM and its data are left exactly as they are: only the explanation is added.
            raise boot_failed(self.client, name, f"the microVM of workspace {workspace_id}", result.stderr, [])

    def stop(self, workspace_id: str) -> None:
        state = self._require(workspace_id)
        if state.msb_status in ("Stopped", "Crashed", "Created"):
            return
        self._stop(state.name, workspace_id)

    def _stop(self, name: str, workspace_id: str) -> None:
        graceful = self.client.run(["stop", "--timeout", str(STOP_GRACE_S), name],
                                   action=f"stopping workspace {workspace_id}",
                                   timeout=STOP_GRACE_S + QUICK_TIMEOUT_S, missing=name, check=False)
        if graceful.returncode != 0:  # msb's graceful budget ran out ("timeout fails without killing"): force it
            self.client.run(["stop", "--force", name], action=f"force-stopping workspace {workspace_id}",
                            timeout=QUICK_TIMEOUT_S, missing=name)

    def delete(self, workspace_id: str) -> None:
        """Stop and remove the sandbox and the volumes devsy created for it; a missing sandbox is not an error."""
        state = self._inspect(workspace_id)
        if state is None:
            return
        volumes = parse_created_volumes(state.details.labels.get(LABEL_CREATED_VOLUMES, ""))
        self._remove_sandbox(state.name, workspace_id, running=state.msb_status != "Stopped")
        problems = remove_volumes(self.client, volumes)
        if problems:
            raise DriverError(f"workspace {workspace_id}'s sandbox was removed, but not all of its volumes: "
                              + "; ".join(problems), hint="remove them with `msb volume rm NAME`")

    def _remove_sandbox(self, name: str, workspace_id: str, *, running: bool) -> None:
        try:
            if running:
                self._stop(name, workspace_id)
            self.client.run(["rm", name], action=f"removing the sandbox of workspace {workspace_id}",
                            timeout=QUICK_TIMEOUT_S, missing=name)
        except NotFound:
            return
        except DriverError:
            # A VM that would not stop or a half-started one: remove it by force rather than leave it behind.
            try:
                self.client.run(["rm", "--force", name], action=f"force-removing the sandbox of workspace "
                                f"{workspace_id}", timeout=QUICK_TIMEOUT_S, missing=name)
            except NotFound:
                return

    def reuse_preflight(self, workspace_id: str, remote_user: str, mount_policy: MountPolicy | None) -> None:
        """Read-only: compares the sandbox's recorded owner and mount policy with the request."""
        labels = self._require(workspace_id).details.labels
        presentation = WorkspaceMountPolicy(self.options.stat_virtualization, self.options.host_permissions,
                                            recorded_owner(labels))
        check_reuse(workspace_id, labels, Ownership(remote_user, extend_policy(mount_policy, presentation)))

    # -- commands ------------------------------------------------------------------------------------------------
    def exec(self, workspace_id: str, request: ExecRequest) -> ExecResult:
        state = self._require(workspace_id)
        if not state.details.running:
            # `msb exec` would boot a stopped sandbox by itself; devsy never starts a workspace implicitly.
            raise PreconditionFailed(f"workspace {workspace_id} is not running ({state.msb_status.lower()})",
                                     hint=f"run `devsy start {workspace_id}` first")
        return run_exec(self.client, state.name, request)

    def logs(self, workspace_id: str, out: BinaryIO) -> None:
        name = self._require(workspace_id).name
        # A detached workload's output is captured as stdout/stderr (pipe mode) or as merged `output` (pty mode);
        # which one msb uses cannot be seen without a booted VM, so all three are read (the others are empty).
        result = self.client.run(["logs", name, "--source", "stdout,stderr,output", "--no-color"],
                                 action=f"reading the logs of workspace {workspace_id}", timeout=QUICK_TIMEOUT_S,
                                 missing=name)
        out.write(result.stdout)
        out.flush()

    def target_architecture(self, workspace_id: str) -> str:
        # msb runs guests of the host's architecture (KVM, no emulation), so this answers before the sandbox exists.
        return normalize_arch(platform.machine())
