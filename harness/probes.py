"""Prerequisite probes: can a backend really run a guest here? Run once per backend per run, with evidence.

Docker: the daemon answers, the guest image is present (built by fixtures.guest_image when available), and a
container of it runs `true` with host networking. A provider whose probe fails is "not runnable here".
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from filelock import FileLock

from harness.commands import tail
from harness.ownership import HARNESS_RUN_LABEL

FALLBACK_GUEST_IMAGE = "devsy-guest:bookworm"
RUN_TIMEOUT = 60
LOCK_TIMEOUT = 900


@dataclass
class ProbeStep:
    command: str
    exit_status: int | None
    output_tail: str
    duration: float


@dataclass
class ProbeResult:
    backend: str
    ok: bool
    summary: str
    steps: list[ProbeStep] = field(default_factory=list)

    def evidence(self) -> str:
        """Multi-line evidence: each command with exit status, duration and last output lines."""
        lines = [f"probe {self.backend}: {'ok' if self.ok else 'FAILED'}: {self.summary}"]
        for step in self.steps:
            lines.append(f"  $ {step.command} -> exit {step.exit_status} in {step.duration:.2f}s")
            lines += [f"    {line}" for line in step.output_tail.splitlines()[-10:]]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ProbeResult":
        steps = [ProbeStep(**step) for step in data.get("steps", [])]
        return cls(backend=data["backend"], ok=bool(data["ok"]), summary=str(data["summary"]), steps=steps)


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


PROBES: dict[str, Callable[[str], ProbeResult]] = {"docker": probe_docker}


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
