"""agent-delivery: `devsy up` streams the in-guest agent over exec, verified, and retries an interrupted transfer with
a fresh source (CATALOGUE.md).

What devsy did is read from three independent places: the guest's own view of the file (checksum, mode, inode,
through a separate exec), devsy's note `<DEVSY_HOME>/workspaces/<id>/agent.json`, and the delivery trace devsy
writes when `DEVSY_AGENT_DELIVERY_TRACE` is set (one JSON event per line: each attempt, each source's open and close
with the bytes read from it). `DEVSY_AGENT_DELIVERY_FAULT=interrupt-first` is devsy's test-only hook that ends the
first source halfway (devsy/agent/delivery_fault.py): the only honest way to interrupt a transfer from outside.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
import uuid
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devsy.agent.lock import DEFAULT_LOCK
from fixtures.artifact_server import ArtifactServer
from harness import case
from harness.case_context import CaseContext
from harness.commands import run_bounded
from harness.devsy_handle import DevsyHandle
from harness.providers import Provider
from scenarios.support import FigureSink, local_source, tree_digest

GUEST_DIR = "/usr/local/lib/devsy"
TRACE_ENV = "DEVSY_AGENT_DELIVERY_TRACE"
FAULT_ENV = "DEVSY_AGENT_DELIVERY_FAULT"


@dataclass(frozen=True)
class GuestFile:
    sha256: str
    mode: str
    inode: str
    mtime: str


def _guest_path(sha: str) -> str:
    """Where devsy keeps an agent with this checksum in the guest."""
    return f"{GUEST_DIR}/agent-{sha[:12]}.pyz"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _built_agent(case: CaseContext, devsy: DevsyHandle, env: dict[str, str] | None = None) -> Path:
    """The agent devsy builds for this host (`python -m devsy.agent.build` prints its cached path)."""
    completed = run_bounded([sys.executable, "-m", "devsy.agent.build"], env=devsy.env(env),
                            timeout=case.deadline.timeout("building the agent", 600))
    devsy.log.add(completed.record(note="the agent devsy delivers by default"))
    assert completed.exit_code == 0, f"building the agent failed: {completed.stderr[-2000:]!r}"
    return Path(completed.stdout.decode().strip().splitlines()[-1])


def _note(devsy: DevsyHandle, wid: str) -> dict[str, Any]:
    path = devsy.home / "workspaces" / wid / "agent.json"
    assert path.is_file(), f"devsy wrote no agent note {path}"
    return json.loads(path.read_text())


def _guest_file(devsy: DevsyHandle, wid: str, path: str) -> GuestFile:
    out = devsy.sh(wid, f"sha256sum {shlex.quote(path)} | cut -d' ' -f1; stat -c '%a %i %Y' {shlex.quote(path)}")
    sha, stat = out.strip().splitlines()
    mode, inode, mtime = stat.split()
    return GuestFile(sha, mode, inode, mtime)


def _guest_dir(devsy: DevsyHandle, wid: str) -> list[str]:
    return devsy.sh(wid, f"ls -A {GUEST_DIR}").split()


def _mounts_over(devsy: DevsyHandle, wid: str, path: str) -> list[str]:
    """Mount points (other than /) that hold `path`: a file on one of them did not come over exec."""
    points = devsy.sh(wid, "awk '{print $5}' /proc/self/mountinfo").split()
    return [point for point in points if point != "/" and (path + "/").startswith(point.rstrip("/") + "/")]


def _trace(path: Path) -> list[dict[str, Any]]:
    assert path.is_file(), f"devsy wrote no delivery trace to {path} ({TRACE_ENV})"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _events(trace: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [event for event in trace if event["event"] == name]


def _assert_installed(devsy: DevsyHandle, wid: str, sha: str) -> GuestFile:
    """The agent with checksum `sha` is at its versioned path, 0755, alone in its folder, noted, and it runs."""
    path = _guest_path(sha)
    note = _note(devsy, wid)
    assert (note["guest_path"], note["sha256"]) == (path, sha), f"devsy's agent note: {note}"
    guest = _guest_file(devsy, wid, path)
    assert (guest.sha256, guest.mode) == (sha, "755"), f"the guest's copy: {guest}"
    assert _guest_dir(devsy, wid) == [path.rsplit("/", 1)[1]], "temporary or stale files left beside the agent"
    works = devsy.run("ssh", wid, "--command", "echo agent-ok")
    assert (works.exit_code, works.stdout) == (0, b"agent-ok\n"), works.stderr[-2000:]
    return guest


@case("agent-delivery/stream-delivery")
def test_stream_delivery(provider: Provider, case: CaseContext, devsy: DevsyHandle, record_figure: FigureSink) -> None:
    agent = _built_agent(case, devsy)
    sha, size = _sha(agent), agent.stat().st_size
    trace_file = case.workdir / "delivery-trace.jsonl"
    env = {TRACE_ENV: str(trace_file)}
    source = local_source(case)
    before = tree_digest(source)
    wid = case.workspace_id()

    devsy.up(source, wid, env=env).ws()

    guest = _assert_installed(devsy, wid, sha)
    assert agent.stat().st_mode & 0o777 == 0o755, f"the source {agent} is not 0755"
    trace = _trace(trace_file)
    assert [e["source"] for e in _events(trace, "open")] == [1], f"expected one source: {trace}"
    closes = _events(trace, "close")
    assert [(e["source"], e["bytes_read"]) for e in closes] == [(1, size)], f"the source was not streamed whole " \
        f"and closed once: {trace}"
    assert [e["attempt"] for e in _events(trace, "delivered")] == [1], trace
    assert _mounts_over(devsy, wid, GUEST_DIR) == [], "the agent's folder is a mount, not the instance's own disk"
    assert tree_digest(source) == before, "delivery wrote into the workspace source"

    # An unchanged agent is not sent again, opening no source: the next up finds it in the guest ("present"), or
    # proves from the host that it is in place and does not look at all (the built-in Docker driver's view of the
    # container's root: devsy/agent/host_view.py).
    devsy.up(source, wid, env=env).ws()
    assert _sha(_built_agent(case, devsy)) == sha, "devsy's agent build changed during the case (its guest " \
        "sources were edited meanwhile), so a second transfer is right; rerun on a stable tree"
    again = [e["event"] for e in _trace(trace_file)[len(trace):]]
    assert again in (["present"], []), f"the second up transferred again: {again}"
    record_figure("second_up_agent_check", "in the guest" if again else "from the host")
    assert _guest_file(devsy, wid, _guest_path(sha)) == guest, "the guest's agent was rewritten"
    record_figure("agent_bytes", size)
    record_figure("agent_sha256", sha)


@case("agent-delivery/offline-delivery")
def test_offline_delivery(provider: Provider, case: CaseContext, devsy: DevsyHandle, record_figure: FigureSink) -> None:
    built = _built_agent(case, devsy)
    # A valid agent that is not devsy's build: the same archive with its own zip comment, so its checksum is unique
    # and the guest can only hold it if devsy delivered exactly this file.
    offline = case.workdir / "offline-agent.pyz"
    shutil.copy2(built, offline)
    with zipfile.ZipFile(offline, "a") as archive:
        archive.comment = f"devsy-harness offline agent {uuid.uuid4().hex}".encode()
    sha = _sha(offline)
    assert sha != _sha(built)
    empty_cache, no_wheels = case.workdir / "empty-cache", case.workdir / "no-wheels"
    empty_cache.mkdir()
    no_wheels.mkdir()
    trace_file = case.workdir / "delivery-trace.jsonl"
    with ArtifactServer() as index:
        # Where a build would have to get its wheels: an owned index that counts requests, no local wheels, no
        # cached build, no pip configuration files.
        offline_env = {"DEVSY_CACHE_DIR": str(empty_cache), "PIP_INDEX_URL": index.url("/simple/"),
                       "PIP_EXTRA_INDEX_URL": index.url("/extra/"), "PIP_FIND_LINKS": str(no_wheels),
                       "PIP_CONFIG_FILE": os.devnull, "PIP_DEFAULT_TIMEOUT": "5"}
        env = {**offline_env, "DEVSY_AGENT_BINARY": str(offline), TRACE_ENV: str(trace_file)}
        source = local_source(case)
        wid = case.workspace_id()

        devsy.up(source, wid, env=env).ws()
        _assert_installed(devsy, wid, sha)
        delivered = _events(_trace(trace_file), "delivered")

        assert [e["sha256"] for e in delivered] == [sha], f"devsy delivered something else: {delivered}"
        assert index.counts() == {}, f"devsy asked the package index for something: {index.counts()}"
        assert sorted(p.name for p in empty_cache.iterdir()) == [], "devsy built or downloaded into its cache"
        # Without DEVSY_AGENT_BINARY the same environment still needs no index: the build reads the wheels installed
        # with devsy (devsy/agent/_wheels, setup.py), producing the very agent the normal build did.
        control_cache = case.workdir / "control-cache"
        control = run_bounded([sys.executable, "-m", "devsy.agent.build"],
                              env=devsy.env({**offline_env, "DEVSY_CACHE_DIR": str(control_cache)}),
                              timeout=case.deadline.timeout("the control build", 600))
        devsy.log.add(control.record(note="control: a build without DEVSY_AGENT_BINARY, same offline environment"))
        after_build = index.counts()
        assert control.exit_code == 0 and after_build == {}, \
            f"a build without DEVSY_AGENT_BINARY needed the package index (exit {control.exit_code}, requests " \
            f"{after_build}): the agent's wheels are not in devsy's installed package data; install devsy " \
            f"with pip (`pip install -e .` runs setup.py's build_agent_wheels). stderr: {control.stderr[-2000:]!r}"
        assert b"downloading them once with pip" not in control.stderr, control.stderr[-2000:]
        assert "wheels" not in {p.name for p in control_cache.iterdir()}, "the build downloaded wheels into its cache"
        rebuilt = Path(control.stdout.decode().strip().splitlines()[-1])
        assert _sha(rebuilt) == _sha(built), "the offline build differs from the normal one (or devsy's guest " \
            "sources were edited during the case; rerun on a stable tree)"
        # The zero is a measurement, not a dead trap: pip asked for a pinned agent wheel in this environment reaches
        # the counting index (and fails), so any download the build had attempted would have been counted.
        probe = run_bounded([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                             "--dest", str(case.workdir / "probe-dest"), DEFAULT_LOCK.common[0]],
                            env=devsy.env({**offline_env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}),
                            timeout=case.deadline.timeout("the index probe", 120))
        devsy.log.add(probe.record(note="probe: pip download of a pinned agent wheel, same offline environment"))
        assert probe.exit_code != 0 and sum(index.counts().values()) > 0, \
            f"pip in the offline environment did not reach the counting index (exit {probe.exit_code}, " \
            f"{index.counts()}), so zero requests above proves nothing"
        record_figure("control_index_requests", sum(after_build.values()))
        record_figure("probe_index_requests", sum(index.counts().values()))
    record_figure("offline_agent_sha256", sha)


@case("agent-delivery/retry-fresh-source")
def test_retry_fresh_source(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, record_figure: FigureSink
) -> None:
    agent = _built_agent(case, devsy)
    sha, size = _sha(agent), agent.stat().st_size
    trace_file = case.workdir / "delivery-trace.jsonl"
    wid = case.workspace_id()

    devsy.up(local_source(case), wid, env={FAULT_ENV: "interrupt-first", TRACE_ENV: str(trace_file)}).ws()

    trace = _trace(trace_file)
    opened = [e["source"] for e in _events(trace, "open")]
    closed = Counter(e["source"] for e in _events(trace, "close"))
    assert opened == [1, 2], f"each attempt must open its own source: {trace}"
    assert closed == {1: 1, 2: 1}, f"each source must be closed exactly once: {trace}"
    assert _events(trace, "unclosed") == [], f"a source was never closed: {trace}"
    assert {e["source"] for e in _events(trace, "interrupt")} == {1}, f"only the first source is cut: {trace}"
    read = {e["source"]: e["bytes_read"] for e in _events(trace, "close")}
    assert read[1] < size and read[2] == size, f"the retry did not read a fresh source from its start: {read}"
    assert [e["attempt"] for e in _events(trace, "failed")] == [1], trace
    assert [e["attempt"] for e in _events(trace, "delivered")] == [2], trace
    _assert_installed(devsy, wid, sha)
    record_figure("attempts", len(_events(trace, "attempt")))
    record_figure("sources_opened", len(opened))
    record_figure("source_closes", sum(closed.values()))
    record_figure("first_source_bytes", read[1])
    record_figure("second_source_bytes", read[2])
