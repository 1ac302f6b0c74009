"""Runtime Protocol benchmark: provider start-up and exec stream throughput, protocol vs built-in driver.

    python ci/bench_protocol.py [--runs 50] [--mib 64] [--image devsy-guest:bookworm] [--startup-only]
                                [--throughput-only]

Start-up has two figures per provider, each over `--runs` warm runs (after warm-up runs that are not counted) and
each against the Go SDK's fake runtime (../shared/interop/bin/go-fake-runtime, or $DEVSY_GO_INTEROP_BIN) as the
peer when it is there: the handshake line (exec of the provider with the cookie to its go-plugin line on stdout,
no supervisor), and spawn latency, launch (supervisor + provider process) + go-plugin handshake + health check +
Info, as devsy's host does it. Before them, a floor: an interpreter that only imports grpc (what a Python provider
pays before it can listen and print its line; the line cannot come earlier, since a host dials once, right after
reading it). The load average is printed with them: on a busy machine they are not comparable
with a quiet run, only with the peer of the same run. Throughput pipes `--mib` MiB through `cat` in one
workspace container, once through devsy-provider-docker (gRPC Exec) and once through the built-in DockerDriver, in
the same run and the same container, and checks the bytes came back intact; then once more through
devsy-fake-runtime's in-process `cat` (no engine), the protocol path's own ceiling on this machine; then through a
bare grpcio echo of the same frames (ci/grpc_echo.py: no devsy code, no protobuf), the transport's own ceiling.
The load average is printed before the throughput figures, and each figure says the CPU it took per MiB (host, provider, the rest
of the machine): on a machine whose CPUs are all busy, that bounds the ratio more than any wait does.
`--throughput-only` skips the start-up figures.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from devsy.driver.base import ExecRequest, RunOptions
from devsy.driver.docker.driver import DockerDriver
from devsy.driver.docker.options import DockerOptions
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.testing import docker_command, fake_command, running
from devsy.runtime.wire.constants import (APP_PROTOCOL_VERSION, COOKIE_KEY, COOKIE_VALUE, ENV_PROTOCOL_VERSIONS,
                                          MAX_FRAME)
from grpc_echo import echo, echo_server

WARMUP_RUNS = 3
GO_INTEROP_BIN = Path(os.environ.get("DEVSY_GO_INTEROP_BIN") or Path(__file__).resolve().parents[1].parent / "shared"
                      / "interop" / "bin")
_LINE_TIMEOUT_S = 60.0
KEEP_ALIVE = ["/bin/sh"], ["-c", 'trap "exit 0" TERM; while sleep 1000 & wait $!; do :; done']


def spawn_latency(command, runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds per warm run (no CPU figure: two processes and the host share it)."""
    samples = []
    for index in range(WARMUP_RUNS + runs):
        started = time.perf_counter()
        with running(command) as provider:
            provider.client.info()
            elapsed = time.perf_counter() - started
        if index >= WARMUP_RUNS:
            samples.append(elapsed)
    return samples, []


def cpu_ms(pid: int) -> float | None:
    """CPU time the process has used so far, all its threads (Linux schedstat), or None where it is not readable."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            total += int((task / "schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e6


def handshake_line(command: ProviderCommand) -> tuple[float, float | None]:
    """Seconds from exec of the provider (as a host starts it, cookie set) to its handshake line on stdout, and the
    CPU milliseconds it used until then (less sensitive to a busy machine than the wall time)."""
    env = {**os.environ, **command.env, COOKIE_KEY: COOKIE_VALUE, ENV_PROTOCOL_VERSIONS: str(APP_PROTOCOL_VERSION)}
    started = time.perf_counter()
    process = subprocess.Popen([command.binary, *command.args], env=env, stdin=subprocess.DEVNULL,  # noqa: S603
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = threading.Timer(_LINE_TIMEOUT_S, process.kill)  # a provider that never prints ends the read
    deadline.start()
    try:
        line = process.stdout.readline()
        elapsed = time.perf_counter() - started
        cpu = cpu_ms(process.pid)
    finally:
        deadline.cancel()
        process.kill()
        process.wait(_LINE_TIMEOUT_S)
    if not line.startswith(b"1|"):
        raise SystemExit(f"{command.binary} printed {line[:80]!r} within {_LINE_TIMEOUT_S:g}s, not a handshake line")
    return elapsed, cpu


def handshake_latency(command: ProviderCommand, runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU milliseconds (where readable) per warm run."""
    samples = [handshake_line(command) for _ in range(WARMUP_RUNS + runs)][WARMUP_RUNS:]
    return [wall for wall, _ in samples], [cpu for _, cpu in samples if cpu is not None]


def grpc_import_floor(runs: int) -> list[float]:
    """Wall seconds per warm run of an interpreter that only imports grpc and exits: what any Python provider pays
    before it can listen, so the handshake figures of devsy's providers are read against it."""
    samples = []
    for index in range(WARMUP_RUNS + runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import grpc"], check=True, timeout=_LINE_TIMEOUT_S)  # noqa: S603
        if index >= WARMUP_RUNS:
            samples.append(time.perf_counter() - started)
    return samples


def go_fake_command(state_dir: Path) -> ProviderCommand | None:
    """The Go SDK fake runtime (flags only, no `serve`), or None when the interop binaries are not here."""
    binary = GO_INTEROP_BIN / "go-fake-runtime"
    if not os.access(binary, os.X_OK):
        return None
    return ProviderCommand(binary=str(binary), args=["--state-dir", str(state_dir)], env={})


def startup(runs: int) -> None:
    """Both start-up figures for the Go peer and devsy's providers, with each provider's ratio to the peer."""
    state_dir = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    providers = [("devsy-fake-runtime", fake_command(state_dir / "py")),
                 ("devsy-provider-docker", docker_command())]
    peer = go_fake_command(state_dir / "go")
    if peer is None:
        print(f"Go peer: no go-fake-runtime in {GO_INTEROP_BIN}; figures without a peer", flush=True)
    else:
        providers.insert(0, ("go-fake-runtime (peer)", peer))
    floor = grpc_import_floor(runs)
    print(f"floor, `python -c 'import grpc'` ({runs} warm runs, load average {os.getloadavg()[0]:.2f}): p50 "
          f"{percentile(floor, 0.5) * 1000:.0f} ms, p95 {percentile(floor, 0.95) * 1000:.0f} ms", flush=True)
    for figure, measure in (("handshake line after exec", handshake_latency),
                            ("launch+handshake+Info", spawn_latency)):
        peer_p50 = None
        for name, command in providers:
            load = os.getloadavg()[0]
            samples, cpu = measure(command, runs)
            p50 = percentile(samples, 0.5)
            if command is peer:
                peer_p50 = p50
            ratio = f", {p50 / peer_p50:.1f}x the Go peer" if peer_p50 and command is not peer else ""
            print(f"{figure}, {name} ({runs} warm runs, load average {load:.2f}): p50 {p50 * 1000:.0f} ms, "
                  f"p95 {percentile(samples, 0.95) * 1000:.0f} ms, mean {statistics.mean(samples) * 1000:.0f} ms"
                  f"{ratio}{f'; cpu before the line p50 {percentile(cpu, 0.5):.0f} ms' if cpu else ''}", flush=True)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Digest(io.RawIOBase):
    """A sink that hashes what it receives (so 64 MiB never sits in memory twice)."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.hash.update(data)
        self.size += len(data)
        return len(data)


class CpuMeter:
    """CPU seconds spent while it is open: by this process (the host side), by its descendants (supervisor and
    provider), and by the whole machine (the rest is the engine, the container's cat and anything else running).
    Where a throughput goes on a CPU-bound machine: MiB/s can be no more than CPUs / (CPU seconds per MiB)."""

    def __enter__(self) -> CpuMeter:
        self._start = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._sample()
        self.host, self.providers, self.machine = (b - a for a, b in zip(self._start, end))

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        own = os.times()
        descendants = 0.0
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                times = child.cpu_times()
                descendants += times.user + times.system
        machine = psutil.cpu_times()
        return own.user + own.system, descendants, machine.user + machine.system + machine.nice + machine.softirq \
            + machine.irq

    def per_mib(self, mib: float, child: str = "provider") -> str:
        rest = self.machine - self.host - self.providers
        return (f"CPU ms per MiB: host {1000 * self.host / mib:.1f}, {child} {1000 * self.providers / mib:.1f}, "
                f"engine+cat+other {1000 * rest / mib:.1f}, machine {1000 * self.machine / mib:.1f} (a CPU-bound "
                f"ceiling of {os.cpu_count() * mib / self.machine:.0f} MiB/s on {os.cpu_count()} CPUs)")


def throughput(run_exec, payload: bytes, meter: CpuMeter | None = None) -> float:
    """MiB/s of `payload` through cat and back; raises if a byte differs. `meter` counts the CPU it took."""
    sink = Digest()
    with meter or contextlib.nullcontext():
        started = time.perf_counter()
        result = run_exec(ExecRequest(argv=["cat"], stdin=io.BytesIO(payload), stdout=sink, stderr=io.BytesIO()))
        elapsed = time.perf_counter() - started
    if result.exit_code != 0 or sink.hash.digest() != hashlib.sha256(payload).digest():
        raise SystemExit(f"cat returned {sink.size} bytes with exit {result.exit_code}: the stream is not intact")
    return len(payload) / (1024 * 1024) / elapsed


def protocol_floor(payload: bytes, mib: int) -> None:
    """The same stream with no backend: devsy-fake-runtime's `cat` copies stdin to stdout inside the provider, so
    this is what the protocol path alone (host client, gRPC, SDK pump) allows on this machine, without the engine."""
    with running(fake_command(Path(tempfile.mkdtemp(prefix="bench-floor-")))) as provider:
        provider.client.run_image("floor", RunOptions(image="none"))
        run_exec = lambda r: provider.client.exec("floor", r)  # noqa: E731
        throughput(run_exec, payload[: 1024 * 1024])
        meter = CpuMeter()
        print(f"exec {mib} MiB through cat, protocol without a backend (devsy-fake-runtime, in-process cat): "
              f"{throughput(run_exec, payload, meter):.1f} MiB/s; {meter.per_mib(mib)}", flush=True)


def transport_floor(payload: bytes, mib: int) -> None:
    """The same bytes, both ways at once in MAX_FRAME frames, through a bare grpcio echo between two processes:
    what gRPC in Python moves on this machine, with nothing of devsy's on either side."""
    with echo_server() as target:
        echo(target, payload[: 1024 * 1024], MAX_FRAME)  # warm-up: the server's threads, both sides' first-call paths
        meter = CpuMeter()
        with meter:
            started = time.perf_counter()
            echo(target, payload, MAX_FRAME)
            elapsed = time.perf_counter() - started
    print(f"echo {mib} MiB, bare grpcio in {MAX_FRAME}-byte frames (no devsy code): {mib / elapsed:.1f} MiB/s; "
          f"{meter.per_mib(mib, child='echo server')}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--image", default="devsy-guest:bookworm")
    parser.add_argument("--startup-only", action="store_true", help="only the start-up figures, no exec throughput")
    parser.add_argument("--throughput-only", action="store_true", help="only the exec throughput, no start-up")
    args = parser.parse_args()

    if not args.throughput_only:
        startup(args.runs)
    if args.startup_only:
        return 0

    payload = secrets.token_bytes(args.mib * 1024 * 1024)
    print(f"throughput, load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs", flush=True)
    builtin = DockerDriver(DockerOptions(network_mode="host"))
    ws = f"bench-{secrets.token_hex(4)}"
    entrypoint, cmd = KEEP_ALIVE
    builtin.run(ws, RunOptions(image=args.image, entrypoint=entrypoint, cmd=cmd))
    try:
        with running(docker_command()) as provider:
            results = {}
            for label, run_exec in (("built-in DockerDriver", lambda r: builtin.exec(ws, r)),
                                    ("protocol (devsy-provider-docker)", lambda r: provider.client.exec(ws, r))):
                throughput(run_exec, payload[: 1024 * 1024])  # warm-up: connections, caches
                meter = CpuMeter()
                results[label] = throughput(run_exec, payload, meter)
                print(f"exec {args.mib} MiB through cat, {label}: {results[label]:.1f} MiB/s; "
                      f"{meter.per_mib(args.mib)}", flush=True)
        ratio = results["protocol (devsy-provider-docker)"] / results["built-in DockerDriver"]
        print(f"protocol / built-in throughput: {ratio:.2f}", flush=True)
        protocol_floor(payload, args.mib)
        transport_floor(payload, args.mib)
    finally:
        builtin.delete(ws)
    return 0


if __name__ == "__main__":
    sys.exit(main())
