"""remote-agent (CATALOGUE.md): a provider whose backend runs on another machine (agent.local = false). The remote
host is an owned container reached through `docker exec -i`; the devsy agent is delivered there, downloads the
runtime (devsy-provider-docker as one file) from an owned fixture HTTP server, and runs each workspace through it.

What the suite does not claim: the agent executable's own route stays up throughout (offline reuse of the agent
itself is not shown here; only the runtime's route goes offline).
"""

from __future__ import annotations

from harness import case
from harness.backends import BackendInspector
from harness.case_context import CaseContext
from harness.devsy_handle import DevsyHandle
from harness.providers import Provider
from scenarios.support import FigureSink, assert_running, local_source, only_instance
from scenarios.support_remote import (
    AGENT_HOME,
    AGENT_ROUTE,
    RUNTIME,
    RUNTIME_ROUTE,
    TAMPERED_ROUTE,
    open_rig,
)

# The remote agent's private download cache: the only thing runtime-404-reuse removes.
DOWNLOADS = f"{AGENT_HOME}/downloads"


def _guest_command_works(devsy: DevsyHandle, workspace_id: str) -> None:
    assert devsy.sh(workspace_id, "id -un").strip() == "dev"
    ssh = devsy.run("ssh", workspace_id, "--command", "echo through-the-remote-agent; exit 7")
    assert (ssh.exit_code, ssh.stdout) == (7, b"through-the-remote-agent\n"), devsy.log.records[-1].summary()


@case("remote-agent/runtime-download-once")
def test_runtime_download_once(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector,
                               record_figure: FigureSink) -> None:
    rig, wid = open_rig(case), case.workspace_id()
    assert rig.remote_agents() == [] and rig.listing(DOWNLOADS) == [], "the remote host is not fresh"

    assert_running(rig.up(devsy, local_source(case), wid, rig.config()).ws())
    after_up = rig.server.counts()
    (agent_sha, agent_mode, _), = rig.remote_agents()  # the agent was transferred, verified and made executable
    copy = rig.copy_facts(wid)
    record_figure("agent_requests", after_up.get(AGENT_ROUTE, 0))
    record_figure("runtime_requests", after_up.get(RUNTIME_ROUTE, 0))
    record_figure("agent_remote_sha256", agent_sha)
    record_figure("agent_remote_mode", agent_mode)
    record_figure("runtime_pinned_sha256", rig.runtime.sha256)
    record_figure("runtime_copy_sha256", copy.sha256)
    record_figure("runtime_copy_mode", copy.mode)
    record_figure("runtime_copy_inode", copy.inode)

    assert after_up.get(RUNTIME_ROUTE) == 1 and after_up.get(AGENT_ROUTE) == 1, after_up
    assert (agent_sha, agent_mode) == (rig.agent.sha256, "755")
    assert (copy.sha256, copy.mode) == (rig.runtime.sha256, "755")
    assert rig.listing(DOWNLOADS) == [rig.runtime.sha256], "the remote agent's cache lacks the verified runtime"
    host_cache = sorted(p.name for p in rig.host_downloads.iterdir())
    assert rig.runtime.sha256 not in host_cache and rig.agent.sha256 in host_cache, host_cache  # fetched there

    _guest_command_works(devsy, wid)
    assert devsy.stop(wid).ws().status == "stopped"
    assert devsy.start(wid).ws().status == "running"
    assert rig.up(devsy, local_source(case), wid, rig.config()).ws().reused
    assert devsy.logs(wid).exit_code == 0
    _guest_command_works(devsy, wid)

    final = rig.server.counts()
    record_figure("runtime_requests_after_restarts", final.get(RUNTIME_ROUTE, 0))
    assert final == after_up, f"a later command downloaded again: {after_up} -> {final}"
    assert rig.copy_facts(wid) == copy
    assert only_instance(backend, wid).running  # a sibling container of the remote host, on this engine


@case("remote-agent/runtime-404-reuse")
def test_runtime_404_reuse(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector,
                           record_figure: FigureSink) -> None:
    rig, wid = open_rig(case), case.workspace_id()
    assert_running(rig.up(devsy, local_source(case), wid, rig.config()).ws())
    before = rig.copy_facts(wid)
    requests = rig.server.count(RUNTIME_ROUTE)
    assert requests == 1 and rig.listing(DOWNLOADS) == [rig.runtime.sha256]

    rig.sh(f"rm -rf {DOWNLOADS}")  # only the agent's private download cache
    rig.server.set_offline(RUNTIME_ROUTE)
    assert devsy.stop(wid).ws().status == "stopped"
    assert devsy.start(wid).ws().status == "running"
    _guest_command_works(devsy, wid)

    after = rig.copy_facts(wid)
    record_figure("runtime_requests_before", requests)
    record_figure("runtime_requests_after", rig.server.count(RUNTIME_ROUTE))
    record_figure("agent_requests", rig.server.count(AGENT_ROUTE))
    record_figure("copy_sha256_before", before.sha256)
    record_figure("copy_sha256_after", after.sha256)
    record_figure("copy_mode_before", before.mode)
    record_figure("copy_mode_after", after.mode)
    record_figure("copy_inode_before", before.inode)
    record_figure("copy_inode_after", after.inode)
    assert rig.server.count(RUNTIME_ROUTE) == requests, "the offline runtime route was asked again"
    assert after == before, f"the workspace copy changed: {before} -> {after}"
    assert rig.listing(DOWNLOADS) == [], "the runtime was downloaded into the cache again"
    assert only_instance(backend, wid).running


@case("remote-agent/checksum-mismatch")
def test_checksum_mismatch(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector,
                           record_figure: FigureSink) -> None:
    rig, wid = open_rig(case), case.workspace_id()
    error = rig.up(devsy, local_source(case), wid, rig.config(TAMPERED_ROUTE, "tampered.yaml")).expect_error(
        "runtime-checksum")

    record_figure("tampered_requests", rig.server.count(TAMPERED_ROUTE))
    record_figure("pinned_sha256", rig.runtime.sha256)
    record_figure("served_sha256", rig.tampered_sha256)
    assert RUNTIME in error.message, error
    assert rig.runtime.sha256 in error.message and rig.tampered_sha256 in error.message, error
    assert rig.server.count(TAMPERED_ROUTE) == 1, "wrong bytes were fetched more than once"
    # Nothing half-installed: no cached file or partial download there, no workspace folder, nothing here.
    assert rig.listing(DOWNLOADS) == [] and rig.listing(f"{AGENT_HOME}/workspaces") == []
    assert backend.instances(wid) == [] and backend.volumes(wid) == []
    devsy.status(wid).expect_error("workspace-not-found")

    # The refusal blocks nothing: the right bytes install and serve the same workspace id.
    assert_running(rig.up(devsy, local_source(case), wid, rig.config()).ws())
    copy = rig.copy_facts(wid)
    record_figure("runtime_requests", rig.server.count(RUNTIME_ROUTE))
    record_figure("runtime_copy_sha256", copy.sha256)
    record_figure("runtime_copy_mode", copy.mode)
    assert (copy.sha256, copy.mode) == (rig.runtime.sha256, "755") and rig.server.count(RUNTIME_ROUTE) == 1
    _guest_command_works(devsy, wid)
