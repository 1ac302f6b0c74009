"""Prerequisite probes: can a backend really run a guest here? Run once per backend per run, with evidence.

Docker: the daemon answers, the guest image is present (built by fixtures.guest_image when available), and a
container of it runs `true` with host networking. MicroSandbox: msb is found and answers (its tooling is usable),
and a tiny microVM really boots (devsy's own boot probe, bounded): a /dev/kvm that opens is not enough.

A provider whose probe fails is "not runnable here", except for cases that need no booted guest (manifest
`needs_boot=False`): those run wherever the probe found the backend's tooling usable.

The real MicroSandbox probe refuses the msb simulator (MSB_PATH at devsy-msb-sim): a stand-in never makes a real
column runnable. A simulated column (`*-microsandbox-sim`) has its own probe, `microsandbox-sim`: the stand-in
answers as itself and devsy's own boot probe, run in a subprocess with the column's MSB_PATH and MSB_HOME, "boots"
the busybox rootfs on it (a Docker container). Its evidence says it is a stand-in.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from filelock import FileLock

from harness.commands import run_bounded, tail
from harness.ownership import HARNESS_RUN_LABEL
from harness.providers import SIMULATORS

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
    stand_in = _stand_in(binary.path)
    if stand_in:
        return ProbeResult("microsandbox", False, f"{binary.path} is the msb simulator, a stand-in ({stand_in}): "
                           "a real MicroSandbox column needs the real msb (unset MSB_PATH); the stand-in runs only "
                           "the *-microsandbox-sim columns", steps, usable=False)
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


def _sim_version() -> str | None:
    """What the msb simulator answers to `--version` (None where fixtures/msb_sim is not importable)."""
    try:
        from fixtures.msb_sim.main import VERSION
    except ImportError:
        return None
    return VERSION


def _stand_in(path: str) -> str:
    """What says `path` is the msb simulator (its own executable, or a `--version` that is the stand-in's); ""
    when it is not."""
    simulator = SIMULATORS["microsandbox"].executable
    if simulator.exists() and Path(path).resolve() == simulator.resolve():
        return f"it is {simulator}"
    answered = run_bounded([path, "--version"], timeout=MSB_QUICK_TIMEOUT)
    said = answered.stdout.decode("utf-8", "replace").strip()
    return f"`--version` says {said!r}" if said and said == _sim_version() else ""


def probe_microsandbox_sim(run_id: str, env: Mapping[str, str] | None = None) -> ProbeResult:
    """The stand-in answers as itself, `ls` works in the column's MSB_HOME, and devsy's boot probe runs on it."""
    sim_version = _sim_version()
    if sim_version is None:
        return ProbeResult("microsandbox-sim", False, "the msb simulator (fixtures/msb_sim) is not importable here",
                           usable=False)
    sim = SIMULATORS["microsandbox"]
    added = dict(env or {})
    binary = added.get(sim.path_env, "")
    if not binary or sim.home_env not in added:
        return ProbeResult("microsandbox-sim", False, "the simulated column has no MSB_PATH/MSB_HOME of its own",
                           usable=False)
    full_env = {**os.environ, **added}
    full_env.pop("MSB_LIBKRUNFW_PATH", None)  # the stand-in runs no libkrunfw; a case may set its own
    steps: list[ProbeStep] = []
    commands = (("--version",), ("ls", "--format", "json"))
    for args in commands:
        done = run_bounded([binary, *args], timeout=MSB_QUICK_TIMEOUT, env=full_env)
        steps.append(ProbeStep(f"{binary} {' '.join(args)}", done.exit_code, tail(done.stdout + done.stderr, 20),
                               round(done.duration, 3)))
        if done.exit_code != 0:
            return ProbeResult("microsandbox-sim", False, f"the msb simulator does not answer `{' '.join(args)}` "
                               f"(exit {done.exit_code})", steps, usable=False)
        if args == ("--version",) and done.stdout.decode("utf-8", "replace").strip() != sim_version:
            return ProbeResult("microsandbox-sim", False, f"{binary} is not the msb simulator (a simulated column "
                               "runs only on the stand-in)", steps, usable=False)
    boot = [sys.executable, "-m", "devsy.driver.microsandbox.probe", "--timeout", str(MSB_BOOT_TIMEOUT)]
    booted = run_bounded(boot, timeout=MSB_BOOT_TIMEOUT + 30, env=full_env)
    steps.append(ProbeStep(f"{sim.path_env}={binary} {sim.home_env}=<run>/{sim.home_dir} python -m "
                           "devsy.driver.microsandbox.probe", booted.exit_code,
                           tail(booted.stdout + booted.stderr, 20), round(booted.duration, 3)))
    if booted.exit_code != 0:
        return ProbeResult("microsandbox-sim", False, f"devsy's boot probe fails on the msb simulator (exit "
                           f"{booted.exit_code}{', timed out' if booted.timed_out else ''})", steps, usable=True)
    return ProbeResult("microsandbox-sim", True, "SIMULATED: devsy's boot probe runs on devsy-msb-sim (a stand-in "
                       "backed by Docker; no microVM booted)", steps, usable=True)


# A probe per provider target (harness/providers.py Provider.target), called with the run id, and with the column's
# environment when the column has one (a simulated column's MSB_PATH and MSB_HOME).
PROBES: dict[str, Callable[..., ProbeResult]] = {
    "docker": probe_docker,
    "microsandbox": probe_microsandbox,
    "microsandbox-sim": probe_microsandbox_sim,
}


def run_probe(backend: str, run_id: str, env: Mapping[str, str] | None = None) -> ProbeResult:
    probe = PROBES.get(backend)
    if probe is None:
        return ProbeResult(backend, False, f"the harness has no probe for backend {backend!r}")
    return probe(run_id, env) if env else probe(run_id)


def probe_once(backend: str, run_id: str, directory: Path, env: Mapping[str, str] | None = None) -> ProbeResult:
    """The run's probe result for `backend` (a provider's target): computed by the first process that asks, then
    read from disk."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{backend}.json"
    with FileLock(str(directory / f"{backend}.lock"), timeout=LOCK_TIMEOUT):
        if path.exists():
            return ProbeResult.from_dict(json.loads(path.read_text()))
        result = run_probe(backend, run_id, env)
        path.write_text(json.dumps(result.to_dict(), indent=2))
        return result


def recorded_probes(directory: Path) -> dict[str, ProbeResult]:
    """Every probe result this run recorded so far."""
    if not directory.is_dir():
        return {}
    return {p.stem: ProbeResult.from_dict(json.loads(p.read_text())) for p in sorted(directory.glob("*.json"))}
