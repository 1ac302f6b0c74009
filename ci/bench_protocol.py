"""Runtime Protocol benchmark: provider spawn latency and exec stream throughput, protocol vs built-in driver.

    python ci/bench_protocol.py [--runs 50] [--mib 64] [--image devsy-guest:bookworm]

Spawn latency is launch (supervisor + provider process) + go-plugin handshake + health check + Info, measured over
`--runs` warm runs (after warm-up runs that are not counted). Throughput pipes `--mib` MiB through `cat` in one
workspace container, once through devsy-provider-docker (gRPC Exec) and once through the built-in DockerDriver, in
the same run and the same container, and checks the bytes came back intact.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from devsy.driver.base import ExecRequest, RunOptions
from devsy.driver.docker.driver import DockerDriver
from devsy.driver.docker.options import DockerOptions
from devsy.runtime.host.testing import docker_command, fake_command, running

WARMUP_RUNS = 3
KEEP_ALIVE = ["/bin/sh"], ["-c", 'trap "exit 0" TERM; while sleep 1000 & wait $!; do :; done']


def spawn_latency(command, runs: int) -> list[float]:
    samples = []
    for index in range(WARMUP_RUNS + runs):
        started = time.perf_counter()
        with running(command) as provider:
            provider.client.info()
            elapsed = time.perf_counter() - started
        if index >= WARMUP_RUNS:
            samples.append(elapsed)
    return samples


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


def throughput(run_exec, payload: bytes) -> float:
    """MiB/s of `payload` through cat and back; raises if a byte differs."""
    sink = Digest()
    started = time.perf_counter()
    result = run_exec(ExecRequest(argv=["cat"], stdin=io.BytesIO(payload), stdout=sink, stderr=io.BytesIO()))
    elapsed = time.perf_counter() - started
    if result.exit_code != 0 or sink.hash.digest() != hashlib.sha256(payload).digest():
        raise SystemExit(f"cat returned {sink.size} bytes with exit {result.exit_code}: the stream is not intact")
    return len(payload) / (1024 * 1024) / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--image", default="devsy-guest:bookworm")
    args = parser.parse_args()

    for name, command in (("devsy-provider-docker", docker_command()),
                          ("devsy-fake-runtime", fake_command(Path(tempfile.mkdtemp())))):
        samples = spawn_latency(command, args.runs)
        print(f"spawn latency {name} (launch+handshake+Info, {args.runs} warm runs): "
              f"p50 {percentile(samples, 0.5) * 1000:.0f} ms, p95 {percentile(samples, 0.95) * 1000:.0f} ms, "
              f"mean {statistics.mean(samples) * 1000:.0f} ms", flush=True)

    payload = secrets.token_bytes(args.mib * 1024 * 1024)
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
                results[label] = throughput(run_exec, payload)
                print(f"exec {args.mib} MiB through cat, {label}: {results[label]:.1f} MiB/s", flush=True)
        ratio = results["protocol (devsy-provider-docker)"] / results["built-in DockerDriver"]
        print(f"protocol / built-in throughput: {ratio:.2f}", flush=True)
    finally:
        builtin.delete(ws)
    return 0


if __name__ == "__main__":
    sys.exit(main())
