"""Benchmark `devsy ssh` against raw `docker exec` on the same workspace, in one run, interleaved.

Prints: 64 MiB each way through `devsy ssh` vs `docker exec -i` (MiB/s and ratio, end to end and with the median
session setup time subtracted), and the median `devsy ssh WS --command true` vs `docker exec C true` (ratio); the
last line is the same as one JSON object. Runs each pair interleaved so that background load hits both alike.

`devsy ssh` normally runs its session through the workspace's SSH master (started by the first `devsy ssh`; see
devsy/ssh/mux/master.py). Besides that steady state, the latency line shows a cold start (the master stopped before
each run, so the run starts it) and the path without a master (DEVSY_SSH_MUX=0), for reference.

    python ci/bench_ssh.py [--runs N] [--latency-runs N] [--image devsy-guest:bookworm]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MIB = 1024 * 1024
SIZE = 64 * MIB
DEVSY = [sys.executable, "-m", "devsy"]


def _timed(argv: list[str], env: dict[str, str], stdin_path: Path | None = None, expect: bytes | None = None) -> float:
    started = time.perf_counter()
    with open(stdin_path or os.devnull, "rb") as stdin:
        proc = subprocess.run(argv, stdin=stdin, capture_output=True, env=env, timeout=300)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0 or (expect is not None and proc.stdout.strip() != expect):
        raise SystemExit(f"bench: {argv} failed ({proc.returncode}): {proc.stdout[-200:]!r} {proc.stderr[-500:]!r}")
    return elapsed


def _cold(ssh: list[str], env: dict[str, str], home: Path, workspace: str) -> float:
    """One `devsy ssh ... true` that has to start the workspace's SSH master (stopped first, untimed)."""
    from devsy.ssh.mux.client import stop_master

    uid = json.loads((home / "workspaces" / workspace / "workspace.json").read_text())["uid"]
    stop_master(home, workspace, uid)
    return _timed([*ssh, "true"], env)


def _pair(name: str, runs: int, devsy_cmd, raw_cmd) -> tuple[float, float]:
    devsy_times, raw_times = [], []
    for _ in range(runs):
        devsy_times.append(devsy_cmd())
        raw_times.append(raw_cmd())
    return statistics.median(devsy_times), statistics.median(raw_times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per throughput measurement (median)")
    parser.add_argument("--latency-runs", type=int, default=15, help="runs per latency measurement (median)")
    parser.add_argument("--image", default="devsy-guest:bookworm")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="devsy-bench-"))
    env = {**os.environ, "DEVSY_HOME": str(work / "home"), "DEVSY_SSH_CONFIG": str(work / "ssh_config")}
    workspace = f"bench-{os.getpid()}"
    project = work / "project"
    (project / ".devcontainer").mkdir(parents=True)
    (project / ".devcontainer" / "devcontainer.json").write_text(json.dumps({"image": args.image}))
    data = work / "input.bin"
    data.write_bytes(os.urandom(SIZE))
    try:
        up = subprocess.run([*DEVSY, "up", str(project), "--id", workspace, "--provider-option", "NETWORK_MODE=host",
                             "--json"], capture_output=True, env=env, timeout=600)
        if up.returncode != 0:
            raise SystemExit(f"bench: devsy up failed: {up.stderr.decode()[-2000:]}")
        container = json.loads(up.stdout)["workspace"]["instance"]["id"]
        ssh = [*DEVSY, "ssh", workspace, "--command"]
        size = str(SIZE).encode()

        # Warm-up: caches, the agent's first unpack, page cache for the input file.
        _timed([*ssh, "true"], env)
        _timed(["docker", "exec", container, "true"], env)

        lat_devsy, lat_raw = _pair("true", args.latency_runs, lambda: _timed([*ssh, "true"], env),
                                   lambda: _timed(["docker", "exec", container, "true"], env))
        few = max(3, args.latency_runs // 3)
        lat_exec = statistics.median(_timed([*DEVSY, "exec", workspace, "--", "true"], env) for _ in range(few))
        direct_env = {**env, "DEVSY_SSH_MUX": "0"}
        lat_direct = statistics.median(_timed([*ssh, "true"], direct_env) for _ in range(few))
        lat_cold = statistics.median(_cold(ssh, env, Path(env["DEVSY_HOME"]), workspace) for _ in range(few))
        down_cmd = f"head -c {SIZE} /dev/zero"
        down_devsy, down_raw = _pair(
            "down", args.runs,
            lambda: _timed(["sh", "-c", f"{' '.join(ssh)} '{down_cmd}' | wc -c"], env, expect=size),
            lambda: _timed(["sh", "-c", f"docker exec {container} {down_cmd} | wc -c"], env, expect=size))
        up_devsy, up_raw = _pair(
            "up", args.runs, lambda: _timed([*ssh, "wc -c"], env, stdin_path=data, expect=size),
            lambda: _timed(["docker", "exec", "-i", container, "wc", "-c"], env, stdin_path=data, expect=size))
    finally:
        subprocess.run([*DEVSY, "delete", workspace], capture_output=True, env=env, timeout=300)
        shutil.rmtree(work, ignore_errors=True)

    def rate(seconds: float) -> float:
        return SIZE / MIB / seconds

    result = {
        "latency_true_s": {"devsy_ssh": round(lat_devsy, 4), "docker_exec": round(lat_raw, 4),
                           "devsy_exec": round(lat_exec, 4), "ratio": round(lat_devsy / lat_raw, 2),
                           "devsy_ssh_cold": round(lat_cold, 4), "devsy_ssh_no_master": round(lat_direct, 4)},
    }
    print(f"latency  `devsy ssh --command true` {lat_devsy * 1000:7.1f} ms   `docker exec true` "
          f"{lat_raw * 1000:7.1f} ms   ratio {lat_devsy / lat_raw:5.2f}x (target <= 3)   "
          f"[cold start {lat_cold * 1000:.1f} ms, without a master {lat_direct * 1000:.1f} ms, "
          f"`devsy exec true` {lat_exec * 1000:.1f} ms]")
    for name, devsy_s, raw_s in (("guest->host", down_devsy, down_raw), ("host->guest", up_devsy, up_raw)):
        steady_devsy, steady_raw = rate(max(devsy_s - lat_devsy, 1e-3)), rate(max(raw_s - lat_raw, 1e-3))
        result[name] = {"devsy_ssh_mb_s": round(rate(devsy_s), 1), "docker_exec_mb_s": round(rate(raw_s), 1),
                        "ratio": round(raw_s / devsy_s, 2), "devsy_ssh_transfer_mb_s": round(steady_devsy, 1),
                        "docker_exec_transfer_mb_s": round(steady_raw, 1),
                        "transfer_ratio": round(steady_devsy / steady_raw, 2)}
        print(f"64 MiB {name}  devsy ssh {rate(devsy_s):6.1f} MiB/s   docker exec -i {rate(raw_s):6.1f} MiB/s   "
              f"ratio {raw_s / devsy_s:4.2f} (target >= 0.5)   | setup excluded: {steady_devsy:6.1f} vs "
              f"{steady_raw:6.1f} MiB/s, ratio {steady_devsy / steady_raw:4.2f}")
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
