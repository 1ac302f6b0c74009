"""Prerequisite probes: can a backend really run a guest here? Run once per backend per run, with evidence.

Docker: the daemon answers, the guest image is present (built by fixtures.guest_image when available), and a
container of it runs `true` with host networking. MicroSandbox: msb is found and answers (its tooling is usable),
and a tiny microVM really boots (devsy's own boot probe, bounded): a /dev/kvm that opens is not enough.

A provider whose probe fails is "not runnable here", except for cases that need no booted guest (manifest
`needs_boot=False`): those run wherever the probe found the backend's tooling usable.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from filelock import FileLock

from harness.commands import run_bounded, tail
from harness.ownership import HARNESS_RUN_LABEL

FALLBACK_GUEST_IMAGE = "devsy-guest:bookworm"
RUN_TIMEOUT = 60
LOCK_TIMEOUT = 900
# A microVM boot here fails within ~10 s; a KVM runner boots in a few. Building the busybox probe rootfs the first
# time (apt-get download) counts against the same budget.
MSB_BOOT_TIMEOUT = 180.0
MSB_QUICK_TIMEOUT = 30.0


@dataclass
class ProbeStep:
    command: str
    exit_status: int | None
    output_tail: str
    duration: float


@dataclass
class ProbeResult:
    backend: str
    ok: bool  # a guest runs (a container starts, a microVM boots)
    summary: str
    steps: list[ProbeStep] = field(default_factory=list)
    # The backend's tooling works (daemon answers, msb runs) even if no guest can run; None = same as `ok`.
    usable: bool | None = None

    @property
    def tooling_usable(self) -> bool:
        return self.ok or bool(self.usable)

    def allows(self, *, needs_boot: bool) -> bool:
        """May a case run here: any case when a guest runs, a `needs_boot=False` case when the tooling works."""
        return self.ok or (not needs_boot and self.tooling_usable)

    def evidence(self) -> str:
        """Multi-line evidence: each command with exit status, duration and last output lines."""
        state = "ok" if self.ok else ("FAILED (tooling usable; no guest runs)" if self.usable else "FAILED")
        lines = [f"probe {self.backend}: {state}: {self.summary}"]
        for step in self.steps:
            lines.append(f"  $ {step.command} -> exit {step.exit_status} in {step.duration:.2f}s")
            lines += [f"    {line}" for line in step.output_tail.splitlines()[-10:]]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ProbeResult":
        steps = [ProbeStep(**step) for step in data.get("steps", [])]
        usable = data.get("usable")
        return cls(backend=data["backend"], ok=bool(data["ok"]), summary=str(data["summary"]), steps=steps,
                   usable=None if usable is None else bool(usable))


def guest_image() -> tuple[str, Callable[[], object] | None]:
    """The guest image tag and the builder that ensures it (None until fixtures.guest_image exists)."""
    try:
        from fixtures.guest_image import GUEST_IMAGE_TAG, ensure_guest_image
    except ImportError:
        return FALLBACK_GUEST_IMAGE, None
    return GUEST_IMAGE_TAG, ensure_guest_image


def probe_docker(run_id: str) -> ProbeResult:
    import docker
    import docker.errors

    steps: list[ProbeStep] = []
    image, ensure = guest_image()

    def step(command: str, exit_status: int | None, output: str, started: float) -> None:
        steps.append(ProbeStep(command, exit_status, tail(output, 20), round(time.monotonic() - started, 3)))

    started = time.monotonic()
    try:
        client = docker.from_env(timeout=RUN_TIMEOUT)
        version = client.version()
        step("docker version", 0, f"server {version.get('Version')} api {version.get('ApiVersion')}", started)
    except docker.errors.DockerException as exc:
        step("docker version", 1, str(exc), started)
        return ProbeResult("docker", False, f"the Docker daemon does not answer: {exc}", steps)
    if ensure is not None:
        started = time.monotonic()
        try:
            built = ensure()
            step("fixtures.guest_image.ensure_guest_image()", 0, f"ensured {built or image}", started)
        except Exception as exc:  # evidence, not a crash: the probe reports why the backend cannot run
            step("fixtures.guest_image.ensure_guest_image()", 1, f"{type(exc).__name__}: {exc}", started)
            return ProbeResult("docker", False, f"the guest image {image} could not be built: {exc}", steps)
    command = f"docker run --rm --network host {image} true"
    started = time.monotonic()
    container = None
    try:
        container = client.containers.create(image, ["true"], network_mode="host", labels={HARNESS_RUN_LABEL: run_id})
        container.start()
        status = container.wait(timeout=RUN_TIMEOUT)
        code = int(status.get("StatusCode", -1))
        logs = container.logs().decode("utf-8", "replace")
        step(command, code, logs or "(no output)", started)
    except docker.errors.ImageNotFound as exc:
        step(command, 125, str(exc), started)
        return ProbeResult("docker", False, f"the guest image {image} is not present: {exc}", steps)
    except (docker.errors.DockerException, OSError) as exc:  # requests' ReadTimeout is an OSError
        step(command, None, f"{type(exc).__name__}: {exc}", started)
        return ProbeResult("docker", False, f"a container of {image} did not run: {exc}", steps)
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except docker.errors.DockerException:
                pass  # owned by label: the sweeper removes it
    if code != 0:
        return ProbeResult("docker", False, f"a container of {image} exited {code}", steps)
    return ProbeResult("docker", True, f"daemon answers; {image} runs with --network host", steps)


def probe_microsandbox(run_id: str) -> ProbeResult:
    """msb answers (tooling usable), then a real boot of a tiny rootfs (devsy.driver.microsandbox.probe).

    The probe sandbox (`devsy-probe-<random>`) carries no run label: probe_boot removes it under its own teardown
    budget, and a teardown that failed is part of the evidence (with the `msb rm --force` that removes it)."""
    from devsy.driver.microsandbox.locate import locate_msb
    from devsy.driver.microsandbox.probe import probe_boot
    from devsy.errors import DevsyError

    steps: list[ProbeStep] = []
    started = time.monotonic()
    try:
        binary = locate_msb()
    except DevsyError as exc:
        steps.append(ProbeStep("msb --version", None, tail(str(exc), 20), round(time.monotonic() - started, 3)))
        return ProbeResult("microsandbox", False, f"msb is not usable: {exc.message}", steps, usable=False)
    steps.append(ProbeStep(f"{binary.path} --version", 0, f"msb {binary.version_text}",
                           round(time.monotonic() - started, 3)))
    listed = run_bounded([binary.path, "ls", "--format", "json"], timeout=MSB_QUICK_TIMEOUT)
    steps.append(ProbeStep("msb ls --format json", listed.exit_code, tail(listed.stderr or listed.stdout, 20),
                           round(listed.duration, 3)))
    if listed.exit_code != 0:
        why = "timed out" if listed.timed_out else f"exit {listed.exit_code}"
        return ProbeResult("microsandbox", False, f"`msb ls` failed ({why}): msb's state (MSB_HOME) is not usable",
                           steps, usable=False)
    booted = probe_boot(MSB_BOOT_TIMEOUT)
    steps.append(ProbeStep(booted.command, booted.exit_status, booted.output_tail, booted.duration))
    if booted.ok:
        return ProbeResult("microsandbox", True, f"msb {binary.version_text} boots a microVM", steps, usable=True)
    said = [line for line in booted.output_tail.splitlines() if "did not boot" in line]
    why = said[-1] if said else (booted.output_tail.splitlines() or ["no output"])[-1]
    return ProbeResult("microsandbox", False, f"msb {binary.version_text} works but a microVM does not boot here "
                       f"(exit {booted.exit_status} after {booted.duration:.1f} s): {why}", steps, usable=True)


PROBES: dict[str, Callable[[str], ProbeResult]] = {"docker": probe_docker, "microsandbox": probe_microsandbox}


def run_probe(backend: str, run_id: str) -> ProbeResult:
    probe = PROBES.get(backend)
    if probe is None:
        return ProbeResult(backend, False, f"the harness has no probe for backend {backend!r}")
    return probe(run_id)


def probe_once(backend: str, run_id: str, directory: Path) -> ProbeResult:
    """The run's probe result for `backend`: computed by the first process that asks, then read from disk."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{backend}.json"
    with FileLock(str(directory / f"{backend}.lock"), timeout=LOCK_TIMEOUT):
        if path.exists():
            return ProbeResult.from_dict(json.loads(path.read_text()))
        result = run_probe(backend, run_id)
        path.write_text(json.dumps(result.to_dict(), indent=2))
        return result


def recorded_probes(directory: Path) -> dict[str, ProbeResult]:
    """Every probe result this run recorded so far."""
    if not directory.is_dir():
        return {}
    return {p.stem: ProbeResult.from_dict(json.loads(p.read_text())) for p in sorted(directory.glob("*.json"))}
