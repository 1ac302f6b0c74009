"""The scenario catalogue manifest: suites, case ids and applicability (CATALOGUE.md).

Every scenario function carries `@case("suite/case")` naming one entry here; the report validator checks each run
against this list, so a case added here without a scenario (or the reverse) is reported, never silently skipped.
"""

from __future__ import annotations

from harness.catalogue import Applies, Case, Manifest, Suite

EVERY_PROVIDER = Applies()
# What the msb simulator (the *-microsandbox-sim columns; fixtures/msb_sim, its docstring lists what it does not
# simulate) cannot show: such a case is reported "not runnable on the simulator: <reason>" on those columns.
NO_GUEST_PROC = "a booted guest's /proc (processors, MemTotal): the stand-in's container shares the host kernel"
EXTERNAL_ONLY = Applies(kinds=("external",),
                        reason="a contract of external providers (Runtime Protocol RunImage) other kinds lack")

MANIFEST = Manifest(
    suites=(
        Suite(
            name="lifecycle",
            title="The shared lifecycle and ownership contract",
            cases=(
                Case("up-fresh", "up of an image-only devcontainer writes record + SSH entry; status running"),
                Case("up-reuse", "a second up reuses the same instance (same id and created time)"),
                Case("stop-start", "stop -> stopped; up -> running; created time and instance-local data kept"),
                Case("recreate", "up --recreate: new instance, instance-local data gone, workspace content kept"),
                Case("identity-change-refused", "changed remoteUser refused without --recreate, nothing touched"),
                Case("mount-policy-change-refused", "changed workspace mount refused without --recreate"),
                Case("delete", "instance absent; record, SSH entry, managed content gone; local source kept"),
                # The guest's view of host owners is the backend's contract (scenarios/ownership.py
                # BACKEND_OWNERSHIP): Docker shows host uids verbatim (updateRemoteUserUID not implemented);
                # MicroSandbox shows the developer (uid=,gid= on the workspace mount).
                Case("ownership", "host entries show in the guest with their mode and the backend's owner (Docker: "
                     "the host uid:gid; MicroSandbox: the developer's), host owner unchanged; guest-created entries "
                     "0644/0755 on the host; the developer writes the workspace; PID 1 and the backend's exec run "
                     "as the workload user, devsy ssh/exec as the developer (seen by the backend's exec); rechecked "
                     "after stop/up, --recreate and an identity change with --recreate"),
            ),
        ),
        Suite(
            name="failure-cleanup",
            title="A failing up removes only what it created",
            cases=(
                # Needs no booted guest: on MicroSandbox the failure *is* a VM that never boots (forced on any host
                # with a non-library MSB_LIBKRUNFW_PATH; naturally where KVM cannot boot guests).
                Case("first-up-failure", "a failing first up leaves no record, SSH entry, content, volume, instance",
                     needs_boot=False, simulator=False,
                     simulator_reason="the forced boot failure is a non-library MSB_LIBKRUNFW_PATH, which only a "
                                      "real msb (libkrun) refuses: the stand-in builds no VM"),
                Case("existing-preserved", "a failing up of an existing workspace keeps record, SSH entry, content"),
                Case("source-retry", "a git clone cut mid-pack (server dies; Ctrl-C) leaves no record, content, "
                     "partial clone, SSH entry, instance or git process; the retry clones and runs; failed re-ups "
                     "and an interrupted re-clone keep the existing workspace and its content"),
            ),
        ),
        Suite(
            name="recreate-on-run",
            title="External providers (API 1.3): an existing workspace is replaced only with per-request permission",
            cases=(
                Case("running-target", "a running workspace is replaced by up --recreate only; plain ups reuse it",
                     EXTERNAL_ONLY),
                Case("stopped-target", "a stopped workspace is replaced by up --recreate; data gone, content kept",
                     EXTERNAL_ONLY),
                Case("unauthorized-duplicate", "RunImage without permission on an existing workspace: ALREADY_EXISTS, "
                     "nothing touched", EXTERNAL_ONLY),
                Case("invalid-authorized", "an invalid authorized replacement is rejected; the workspace untouched",
                     EXTERNAL_ONLY),
                Case("survives-restart", "fresh provider processes see the same workspaces; no permission carries "
                     "over; the replacement works", EXTERNAL_ONLY),
            ),
        ),
        Suite(
            name="ssh-streams",
            title="`devsy ssh` carries stdin, stdout, stderr and the exit status byte for byte",
            cases=(
                Case("binary-roundtrip", "1 MiB of random bytes through stdin -> stdout, byte-exact (sha256)"),
                Case("stderr-separate", "stderr without a trailing newline arrives exactly, on stderr only"),
                Case("exit-status", "exit 23 in the guest -> devsy ssh exits 23; a signal -> 128+n"),
                Case("redaction-boundary", "a secret's first bytes at a read boundary pass the tunnel and exec "
                     "unaltered and without stall; what devsy itself prints is still redacted"),
                Case("openssh-client", "the real OpenSSH `ssh <ws>.devsy CMD` works through the written entry"),
                Case("large-stream", "64 MiB each way, byte-exact; throughput recorded"),
                # Issue 18: where the guest has no python3 devsy's agent cannot run; sessions are execs from the host.
                Case("no-python-image", "on the images without python (Debian without python3; busybox only): "
                     "binary-roundtrip, stderr-separate, exit-status and openssh-client hold, and OpenSSH's -tt gets "
                     "a terminal (as on the python image); status says ssh_path exec there and agent on the python "
                     "image"),
            ),
        ),
        Suite(
            name="logs-cancel",
            title="`devsy logs` returns the workload's output; a cancelled command's guest processes die, the "
                  "instance lives",
            cases=(
                Case("logs-running", "markers the workload printed are returned by devsy logs while running"),
                Case("logs-stopped", "markers the workload printed (also while stopping) are returned after stop"),
                Case("cancel-ready-tree", "SIGINT/SIGTERM to devsy ssh kill the guest command and its child within "
                     "10 s (observed); same instance and boot, next command works, content intact"),
                Case("cancel-ready-tree-no-python", "cancel-ready-tree on the images without python (Debian "
                     "without python3; busybox only), the child a shell"),
                Case("cancel-blocked-stdin", "same, with the guest command blocked reading stdin the caller owns"),
            ),
        ),
        Suite(
            name="agent-delivery",
            title="The in-guest agent is streamed over exec, verified, and retried with a fresh source",
            cases=(
                Case("stream-delivery", "the agent is delivered over exec; checksum and mode in the guest match "
                     "the source; an unchanged agent is not sent again"),
                Case("offline-delivery", "with DEVSY_AGENT_BINARY set, that file is delivered and nothing is "
                     "built or downloaded; without it the build reads devsy's installed wheels and asks no index"),
                Case("retry-fresh-source", "an interrupted transfer is retried with a fresh source; each source is "
                     "closed exactly once"),
            ),
        ),
        Suite(
            name="remote-agent",
            title="agent.local = false: the agent on an owned remote host downloads the runtime once, verified, "
                  "and runs the workspace through it (remote-docker: devsy-provider-docker served there)",
            cases=(
                Case("runtime-download-once", "the agent is transferred and the runtime downloaded exactly once "
                     "from the fixture server, checksum verified; later commands download nothing",
                     Applies(kinds=("remote",), backends=("docker",))),
                Case("runtime-404-reuse", "with the agent's download cache removed and the runtime route 404, "
                     "stop/start keep the request count and the copy's checksum, mode and inode; a guest command "
                     "works", Applies(kinds=("remote",), backends=("docker",))),
                Case("checksum-mismatch", "wrong bytes are refused naming both digests; nothing is left "
                     "half-installed; the right bytes then install", Applies(kinds=("remote",), backends=("docker",))),
            ),
        ),
        Suite(
            name="mounts",
            title="Binds, named volumes and tmpfs behave as on Docker; the workspace's permission view follows the "
                  "MicroSandbox policy",
            cases=(
                Case("bind-rw-ro", "a writable bind is shared both ways (also content written after up); a root "
                     "write to a read-only bind is refused by the guest, a later read works, the host file is "
                     "unchanged"),
                Case("volume-tmpfs", "a named volume keeps its data across stop/up, stop/start and --recreate; "
                     "tmpfs is tmpfs in /proc/mounts and statfs and is empty after each"),
                Case("workspace-permissions", "stat virtualization strict/relaxed/off with private host permissions: "
                     "the guest's owner and mode view, guest chmod stays in the guest, the host owner is unchanged",
                     Applies(backends=("microsandbox",),
                             reason="MicroSandbox's workspace options (MICROSANDBOX_WORKSPACE_STAT_VIRTUALIZATION, "
                                    "_HOST_PERMISSIONS); a Docker bind shows the host's own metadata, with no "
                                    "policy to choose"),
                     simulator=False, simulator_reason="virtiofs host-perms=private (a guest chmod shows in the "
                     "guest while the host file keeps its mode): the stand-in's bindfs view shows the mount's owner "
                     "but keeps no guest-only mode, so a guest chmod reaches the host file"),
            ),
        ),
        Suite(
            name="images",
            title="What an image carries (files, ENV, USER, WORKDIR) reaches the guest; a Dockerfile is built with "
                  "its args and target, reused, rebuilt on --recreate and removed by delete",
            cases=(
                Case("image-only", "an image built by the case: its marker file (content, mode, owner), ENV and "
                     "PATH reach devsy exec and ssh; remoteUser unset -> the image's USER; exec/ssh start in the "
                     "workspace folder, PID 1 in the image's WORKDIR; containerEnv overrides and extends the image "
                     "ENV; its values are never printed; delete leaves the user's image"),
                Case("dockerfile-build", "build.args (a default overridden, one without default) and build.target "
                     "reach the guest; a second up reuses the instance and its image; a changed arg with --recreate "
                     "rebuilds; MicroSandbox boots the image loaded by digest; a token-like arg printed by the "
                     "build is masked; delete removes every image devsy built for the workspace"),
                Case("registry-pull", "an image in an owned loopback registry that asks for credentials: without "
                     "them up is an image error naming the registry and creates nothing; with `docker login` "
                     "credentials (DOCKER_CONFIG) it is pulled (manifest reads counted), its marker, ENV and USER "
                     "reach the guest; MicroSandbox: msb pulls it and the host's Docker engine holds it neither "
                     "before nor after; the credentials are never printed",
                     simulator=False, simulator_reason="msb's own registry client: the stand-in pulls through the "
                     "host's Docker engine (docker pull), which then holds the image"),
                Case("local-feature", "a Dockerfile build plus the local Feature ./features/parity (Go's fixture "
                     "shape): the image's and the Feature's marker files and ENV values and the default of its "
                     "option reach devsy exec and ssh; the instance runs the Feature image (MicroSandbox: loaded by "
                     "digest); a second up reuses it and builds nothing; delete removes the build and the layers"),
                Case("oci-feature", "a Feature the case pushes to an owned loopback registry, installed with an "
                     "option: its option, marker file and ENV value reach devsy exec and ssh; the first up reads "
                     "the manifest once and the layer once, a second plain up asks the registry nothing; delete "
                     "removes the Feature layers"),
            ),
        ),
        Suite(
            name="resources",
            title="CPU and memory: what the guest sees, live resize, boot ceilings, invalid options",
            cases=(
                Case("effective", "MicroSandbox: provider options over hostRequirements over 1 CPU / 2048 MiB, seen "
                     "as processors and MemTotal and in msb inspect; Docker (no CPU or memory option): "
                     "met hostRequirements are minimums, not limits: no cgroup CPU quota or memory limit, with or without them",
                     simulator=False, simulator_reason=NO_GUEST_PROC),
                Case("hotplug", "msb modify within the boot ceilings applies live (guest converges); beyond them it "
                     "is refused; same sandbox, boot id and instance data",
                     Applies(backends=("microsandbox",),
                             reason="Docker has no boot ceilings or live resize: its limits are fixed at create"),
                     simulator=False, simulator_reason="hotplug's effect inside a booted guest (new vCPUs and "
                     "memory): the stand-in changes only its container's cgroup limits"),
                Case("ceilings", "a MAX_CPUS/MAX_MEMORY below the effective value (from an option, hostRequirements "
                     "or the default) is refused naming the option; nothing is created", needs_boot=False,
                     applies=Applies(backends=("microsandbox",),
                                     reason="the Docker provider has no ceiling options")),
                Case("invalid-option", "non-positive, zero (MicroSandbox sizes: 0 is refused, empty means "
                     "hostRequirements), overflowing and non-numeric values of every numeric option are refused "
                     "naming the option, never printing the value; nothing is created", needs_boot=False),
            ),
        ),
    ),
)
