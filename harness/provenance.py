"""What a report was made from (manifest digest, commit, devsy version) and on what host: the facts a maintainer
needs to trust it, and the ones `python -m harness merge` compares before joining shard reports."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.catalogue import Manifest
from harness.commands import run_bounded

UNKNOWN = "unknown"
_QUICK_TIMEOUT = 15.0
_REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class HostFacts:
    kernel: str  # uname -r
    python: str
    docker_engine: str  # the server version, or "unavailable: why"
    msb: str  # msb's version, or "unavailable: why"
    dev_kvm: str  # does /dev/kvm open read/write here
    kvm_probe: str  # where the boot evidence is: the microsandbox probe in the report's `probes`, if it ran

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HostFacts":
        return cls(**{name: str(data.get(name, UNKNOWN)) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Provenance:
    manifest_digest: str
    commit: str  # git rev-parse HEAD, or "unknown"
    commit_note: str  # why the commit is unknown ("" when known)
    devsy_version: str
    host: HostFacts | None  # None in a merged report: each source keeps its own host

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["host"] = self.host.to_dict() if self.host is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Provenance":
        host = data.get("host")
        return cls(manifest_digest=str(data.get("manifest_digest", "")), commit=str(data.get("commit", UNKNOWN)),
                   commit_note=str(data.get("commit_note", "")), devsy_version=str(data.get("devsy_version", UNKNOWN)),
                   host=HostFacts.from_dict(host) if isinstance(host, dict) else None)


def manifest_digest(manifest: Manifest) -> str:
    """sha256 over what decides the result ids: suites, cases, applicability, needs_boot (not titles or source)."""
    shape = [[suite.name, [[case.name, sorted(case.applies.kinds), sorted(case.applies.backends), case.needs_boot]
                           for case in suite.cases]] for suite in manifest.suites]
    return "sha256:" + hashlib.sha256(json.dumps(shape, separators=(",", ":")).encode()).hexdigest()


def git_commit(repo: Path = _REPO) -> tuple[str, str]:
    """(commit, note): `git rev-parse HEAD` of the checkout the harness runs from, else ("unknown", why)."""
    if shutil.which("git") is None:
        return UNKNOWN, "git is not installed on the host that made this report"
    # CI runs the catalogue under sudo in the runner user's checkout: git refuses a repository another user owns
    # unless told it is safe (a command-line setting counts; this read changes nothing).
    done = run_bounded(["git", "-c", f"safe.directory={repo}", "-C", str(repo), "rev-parse", "HEAD"],
                       timeout=_QUICK_TIMEOUT)
    commit = done.stdout.decode(errors="replace").strip()
    if done.exit_code != 0 or not commit:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return UNKNOWN, f"`git rev-parse HEAD` in {repo} failed: {said[-1] if said else f'exit {done.exit_code}'}"
    return commit, ""


def devsy_version() -> str:
    try:
        return importlib.metadata.version("devsy")
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


def docker_engine_version() -> str:
    if shutil.which("docker") is None:
        return "unavailable: no docker CLI"
    done = run_bounded(["docker", "version", "--format", "{{.Server.Version}}"], timeout=_QUICK_TIMEOUT)
    version = done.stdout.decode(errors="replace").strip()
    if done.exit_code == 0 and version:
        return version
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return "unavailable: " + ("timed out" if done.timed_out else said[-1] if said else f"exit {done.exit_code}")


def msb_version() -> str:
    from devsy.driver.microsandbox.locate import locate_msb
    from devsy.errors import DevsyError

    try:
        binary = locate_msb()
    except DevsyError as exc:
        return f"unavailable: {exc.message}"
    return f"{binary.version_text} ({binary.path})"


def dev_kvm() -> str:
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return f"present, does not open read/write: {exc.strerror}"
    return "opens read/write (a real boot is the probe's evidence)"


def kvm_probe_reference(probes: dict[str, dict[str, Any]]) -> str:
    probe = probes.get("microsandbox")
    if probe is None:
        return "not probed in this run (no MicroSandbox provider ran a case)"
    state = "a microVM boots" if probe.get("ok") else "FAILED"
    return f"see probes.microsandbox ({state}): {probe.get('summary', '')}"


def _fact(read: Callable[[], str]) -> str:
    """One fact, or why it could not be read: a fact that fails never costs the run its report."""
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - evidence, not a crash (the report and the sweep come after this)
        return f"unavailable: {type(exc).__name__}: {exc}"


def host_facts(probes: dict[str, dict[str, Any]]) -> HostFacts:
    return HostFacts(kernel=platform.release(), python=f"{platform.python_implementation()} "
                     f"{platform.python_version()}", docker_engine=_fact(docker_engine_version),
                     msb=_fact(msb_version), dev_kvm=_fact(dev_kvm), kvm_probe=kvm_probe_reference(probes))


def collect(manifest: Manifest, probes: dict[str, dict[str, Any]]) -> Provenance:
    """This host's facts for a report of `manifest` whose probes are `probes`."""
    try:
        commit, note = git_commit()
    except Exception as exc:  # noqa: BLE001 - as in _fact
        commit, note = "unknown", f"git could not be asked: {type(exc).__name__}: {exc}"
    return Provenance(manifest_digest=manifest_digest(manifest), commit=commit, commit_note=note,
                      devsy_version=devsy_version(), host=host_facts(probes))
