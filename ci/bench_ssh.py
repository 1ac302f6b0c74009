"""Benchmark `devsy ssh` against raw `docker exec` on the same workspace, for each SSH session path, in one run.

devsy serves SSH sessions on one of two paths (devsy/ssh/exec_sessions.py): its agent in the guest (images with
python3) or exec sessions from the host (images without python3, one driver exec per session). Each path gets its
own workspace on an image of its kind, and its own peer: raw `docker exec` into that same container.

Prints per path (each line names the path and image): 64 MiB each way through `devsy ssh` vs `docker exec -i`
(MiB/s and ratio, end to end and with the median session setup time subtracted), and the median
`devsy ssh WS --command true` vs `docker exec C true` (ratio); then each exec path against the agent path; then the
SSH layer on its own (devsy's agent run on this host over pipes, no container and no engine: SshLayer), each way
against the peer's transfer rate, which says how much of a gap the SSH layer alone could explain; the load average
at start and end, and last the same as one JSON object. Every measurement is interleaved (devsy, peer, the next
path's devsy, its peer, ..., the SSH layer) so that background load hits all alike.

`devsy ssh` normally runs its session through the workspace's SSH master (started by the first `devsy ssh`; see
devsy/ssh/mux/master.py). Besides that steady state, the latency line shows a cold start (the master stopped before
each run, so the run starts it) and the path without a master (DEVSY_SSH_MUX=0), for reference.

A workspace that `devsy status --json` does not report on the path it is measured as fails the run: a figure
labelled "exec" that was taken on the agent would be worse than none.

    python ci/bench_ssh.py [--runs N] [--latency-runs N] [--paths agent,exec]
    python ci/bench_ssh.py --paths agent,exec,exec=devsy-guest-busybox:bookworm   # PATH=IMAGE: another image
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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MIB = 1024 * 1024
SIZE = 64 * MIB
DEVSY = [sys.executable, "-m", "devsy"]

# One row per session path: the image of its kind that `python -m fixtures.guest_image --all` builds.
DEFAULT_IMAGES: dict[str, str] = {"agent": "devsy-guest:bookworm", "exec": "devsy-guest-nopython:bookworm"}


@dataclass(frozen=True)
class Target:
    """One path to measure: what `devsy status --json` must call it, on which image."""

    path: str
    image: str

    @property
    def label(self) -> str:
        return f"[{self.path} {self.image}]"


def parse_paths(spec: str) -> list[Target]:
    """`agent,exec,exec=IMAGE`: each item a path (its default image) or PATH=IMAGE; in the order given, no repeats."""
    targets: list[Target] = []
    for item in (part.strip() for part in spec.split(",")):
        path, _, image = item.partition("=")
        if path not in DEFAULT_IMAGES:
            raise argparse.ArgumentTypeError(
                f"unknown SSH path {path!r} in {spec!r}: use {' or '.join(DEFAULT_IMAGES)}, optionally =IMAGE")
        target = Target(path, image or DEFAULT_IMAGES[path])
        if target in targets:
            raise argparse.ArgumentTypeError(f"{target.path}={target.image} is listed twice in {spec!r}")
        targets.append(target)
    return targets


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per throughput measurement (median)")
    parser.add_argument("--latency-runs", type=int, default=15, help="runs per latency measurement (median)")
    parser.add_argument("--paths", type=parse_paths, default=parse_paths(",".join(DEFAULT_IMAGES)),
                        help="session paths to measure, each PATH or PATH=IMAGE (default: agent,exec on "
                             + ", ".join(f"{p}={i}" for p, i in DEFAULT_IMAGES.items()) + ")")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.latency_runs < 1:
        parser.error("--runs and --latency-runs must be at least 1")
    return args


def _timed(argv: list[str], env: dict[str, str], stdin_path: Path | None = None, expect: bytes | None = None) -> float:
    started = time.perf_counter()
    with open(stdin_path or os.devnull, "rb") as stdin:
        proc = subprocess.run(argv, stdin=stdin, capture_output=True, env=env, timeout=300)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0 or (expect is not None and proc.stdout.strip() != expect):
        raise SystemExit(f"bench: {argv} failed ({proc.returncode}): {proc.stdout[-200:]!r} {proc.stderr[-500:]!r}")
    return elapsed


@dataclass
class Workspace:
    """One target's workspace, and the medians measured on it (seconds), by figure name."""

    target: Target
    id: str
    project: Path
    container: str = ""
    medians: dict[str, float] = field(default_factory=dict)

    def ssh(self) -> list[str]:
        return [*DEVSY, "ssh", self.id, "--command"]


def _up(ws: Workspace, env: dict[str, str]) -> None:
    """Bring the workspace up and check it is served on the path it is measured as (status --json ssh_path)."""
    (ws.project / ".devcontainer").mkdir(parents=True)
    (ws.project / ".devcontainer" / "devcontainer.json").write_text(json.dumps({"image": ws.target.image}))
    up = subprocess.run([*DEVSY, "up", str(ws.project), "--id", ws.id, "--provider-option", "NETWORK_MODE=host",
                         "--json"], capture_output=True, env=env, timeout=600)
    if up.returncode != 0:
        raise SystemExit(f"bench: devsy up {ws.target.label} failed: {up.stderr.decode()[-2000:]}\n"
                         f"  hint: the guest images are built by `python -m fixtures.guest_image --all`")
    ws.container = json.loads(up.stdout)["workspace"]["instance"]["id"]
    status = subprocess.run([*DEVSY, "status", ws.id, "--json"], capture_output=True, env=env, timeout=120)
    if status.returncode != 0:
        raise SystemExit(f"bench: devsy status {ws.id} failed: {status.stderr.decode()[-2000:]}")
    seen = json.loads(status.stdout)["workspace"].get("ssh_path")
    if seen != ws.target.path:
        raise SystemExit(f"bench: {ws.target.label} is served by ssh_path {seen!r}, not {ws.target.path!r} "
                         f"(devsy status {ws.id} --json); its figures would be mislabelled.\n"
                         f"  hint: the agent path needs an image with python3, the exec path one without")


def _cold(ws: Workspace, env: dict[str, str]) -> float:
    """One `devsy ssh ... true` that has to start the workspace's SSH master (stopped first, untimed)."""
    from devsy.ssh.mux.client import stop_master

    home = Path(env["DEVSY_HOME"])
    uid = json.loads((home / "workspaces" / ws.id / "workspace.json").read_text())["uid"]
    stop_master(home, ws.id, uid)
    return _timed([*ws.ssh(), "true"], env)


Figure = Callable[[Workspace], float]


def _interleaved(workspaces: list[Workspace], runs: int, figures: dict[str, Figure],
                 once: dict[str, Callable[[], float]] | None = None) -> dict[str, float]:
    """Each run takes every figure of every workspace in turn, then each of `once` (figures of no workspace); each
    workspace keeps its medians, and the medians of `once` are returned."""
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(runs):
        for ws in workspaces:
            for name, measure in figures.items():
                samples.setdefault((ws.id, name), []).append(measure(ws))
        for name, measure_once in (once or {}).items():
            samples.setdefault(("", name), []).append(measure_once())
    for ws in workspaces:
        for name in figures:
            ws.medians[name] = statistics.median(samples[(ws.id, name)])
    return {name: statistics.median(samples[("", name)]) for name in once or {}}


class SshLayer:
    """devsy's SSH layer on its own: the agent devsy builds, run on this host (no container, no engine) and held over
    pipes by devsy's SSH client in this process, as the SSH master holds it. A `devsy ssh` transfer goes through this
    layer and then through the engine, so this rate says how much of a gap to `docker exec -i` the SSH layer (paramiko
    on both ends) could explain. It is an estimate, not a strict ceiling: the session's setup is in its time (a few
    ms), and the agent runs under this host's python, not the guest's."""

    def __init__(self, work: Path) -> None:
        from devsy.agent.build import build_agent
        from devsy.agent.guest.pipe_socket import PipeSocket
        from devsy.ssh.client import connect

        env = {"PATH": os.environ["PATH"], "HOME": str(work), "DEVSY_AGENT_CACHE": str(work / "agent-cache")}
        self._proc = subprocess.Popen([sys.executable, "-E", "-S", str(build_agent().path), "ssh-server", "--stdio",
                                       "--workdir", str(work)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=env)
        try:
            self._transport = connect(PipeSocket(self._proc.stdout.fileno(), self._proc.stdin.fileno()),
                                      os.environ.get("USER") or "root")
        except BaseException:
            self._proc.kill()
            self._proc.wait(timeout=30)
            self._proc.stdin.close()
            self._proc.stdout.close()
            raise

    def down(self) -> float:
        """Seconds for SIZE bytes guest->host, from opening the session to its exit status."""
        return self._session(f"head -c {SIZE} /dev/zero", None, SIZE)

    def up(self, data: Path) -> float:
        """Seconds for SIZE bytes host->guest (read from `data`) into `wc -c`, checked."""
        return self._session("wc -c", data, len(str(SIZE)) + 1, expect=str(SIZE).encode())

    def _session(self, command: str, stdin_path: Path | None, size: int, expect: bytes | None = None) -> float:
        from devsy.agent.guest.tuning import PIPE_READ_SIZE
        from devsy.ssh.client import SessionRequest, open_session, session_end

        started = time.perf_counter()
        channel = open_session(self._transport, SessionRequest(command=command))
        feeder = None
        if stdin_path is not None:
            def feed() -> None:
                with open(stdin_path, "rb") as source:
                    for chunk in iter(lambda: source.read(PIPE_READ_SIZE), b""):
                        channel.sendall(chunk)
                channel.shutdown_write()
            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
        received, tail = 0, b""
        for data in iter(lambda: channel.recv(1 << 24), b""):
            received += len(data)
            tail = (tail + data)[-64:] if expect is not None else b""
        if feeder is not None:
            feeder.join(60)
        channel.status_event.wait(60)
        elapsed = time.perf_counter() - started
        end = session_end(channel)
        channel.close()
        if end.exit_code != 0 or received != size or (expect is not None and tail.strip() != expect):
            raise SystemExit(f"bench: the SSH layer's {command!r} ended {end} with {received} bytes (expected {size})")
        return elapsed

    def close(self) -> None:
        self._transport.close()
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)  # the agent exits by itself once its client has gone
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=30)
        self._proc.stdout.close()


def measure(workspaces: list[Workspace], layer: SshLayer, env: dict[str, str], data: Path, runs: int,
            latency_runs: int) -> dict[str, float]:
    """Every figure of every workspace (into its medians); returns the SSH layer's own (seconds, medians)."""
    size = str(SIZE).encode()
    down_cmd = f"head -c {SIZE} /dev/zero"
    direct_env = {**env, "DEVSY_SSH_MUX": "0"}
    few = max(3, latency_runs // 3)
    # Warm-up: caches, the agent's first unpack, the SSH master, page cache for the input file.
    _interleaved(workspaces, 1, {"warm_ssh": lambda ws: _timed([*ws.ssh(), "true"], env),
                                 "warm_raw": lambda ws: _timed(["docker", "exec", ws.container, "true"], env)})
    _interleaved(workspaces, latency_runs, {
        "lat_devsy": lambda ws: _timed([*ws.ssh(), "true"], env),
        "lat_raw": lambda ws: _timed(["docker", "exec", ws.container, "true"], env)})
    _interleaved(workspaces, few, {
        "lat_exec": lambda ws: _timed([*DEVSY, "exec", ws.id, "--", "true"], env),
        "lat_direct": lambda ws: _timed([*ws.ssh(), "true"], direct_env),
        "lat_cold": lambda ws: _cold(ws, env)})
    layer.down()  # warm-up: the agent's first session
    medians = _interleaved(workspaces, runs, {
        "down_devsy": lambda ws: _timed(["sh", "-c", f"{' '.join(ws.ssh())} '{down_cmd}' | wc -c"], env, expect=size),
        "down_raw": lambda ws: _timed(["sh", "-c", f"docker exec {ws.container} {down_cmd} | wc -c"], env,
                                      expect=size)}, once={"guest->host": layer.down})
    medians |= _interleaved(workspaces, runs, {
        "up_devsy": lambda ws: _timed([*ws.ssh(), "wc -c"], env, stdin_path=data, expect=size),
        "up_raw": lambda ws: _timed(["docker", "exec", "-i", ws.container, "wc", "-c"], env, stdin_path=data,
                                    expect=size)}, once={"host->guest": lambda: layer.up(data)})
    return medians


def _rate(seconds: float) -> float:
    return SIZE / MIB / seconds


def report(ws: Workspace) -> dict:
    """Print the workspace's lines (the path and image in each) and return its figures as JSON."""
    m, label = ws.medians, ws.target.label
    lat_devsy, lat_raw = m["lat_devsy"], m["lat_raw"]
    result: dict = {
        "path": ws.target.path, "image": ws.target.image,
        "latency_true_s": {"devsy_ssh": round(lat_devsy, 4), "docker_exec": round(lat_raw, 4),
                           "devsy_exec": round(m["lat_exec"], 4), "ratio": round(lat_devsy / lat_raw, 2),
                           "devsy_ssh_cold": round(m["lat_cold"], 4), "devsy_ssh_no_master": round(m["lat_direct"], 4)},
    }
    print(f"{label} latency  `devsy ssh --command true` {lat_devsy * 1000:7.1f} ms   `docker exec true` "
          f"{lat_raw * 1000:7.1f} ms   ratio {lat_devsy / lat_raw:5.2f}x (target <= 3)   "
          f"[cold start {m['lat_cold'] * 1000:.1f} ms, without a master {m['lat_direct'] * 1000:.1f} ms, "
          f"`devsy exec true` {m['lat_exec'] * 1000:.1f} ms]")
    for name, devsy_s, raw_s in (("guest->host", m["down_devsy"], m["down_raw"]),
                                 ("host->guest", m["up_devsy"], m["up_raw"])):
        steady_devsy, steady_raw = _rate(max(devsy_s - lat_devsy, 1e-3)), _rate(max(raw_s - lat_raw, 1e-3))
        result[name] = {"devsy_ssh_mb_s": round(_rate(devsy_s), 1), "docker_exec_mb_s": round(_rate(raw_s), 1),
                        "ratio": round(raw_s / devsy_s, 2), "devsy_ssh_transfer_mb_s": round(steady_devsy, 1),
                        "docker_exec_transfer_mb_s": round(steady_raw, 1),
                        "transfer_ratio": round(steady_devsy / steady_raw, 2)}
        print(f"{label} 64 MiB {name}  devsy ssh {_rate(devsy_s):6.1f} MiB/s   docker exec -i {_rate(raw_s):6.1f} "
              f"MiB/s   ratio {raw_s / devsy_s:4.2f} (target >= 0.5)   | setup excluded: {steady_devsy:6.1f} vs "
              f"{steady_raw:6.1f} MiB/s, ratio {steady_devsy / steady_raw:4.2f}")
    return result


def compare(agent: dict, other: dict) -> dict:
    """An exec path's `devsy ssh` figures as multiples of the agent path's (latency: time; transfers: rate)."""
    ratios = {name: round(other["latency_true_s"][name] / agent["latency_true_s"][name], 2)
              for name in ("devsy_ssh", "devsy_ssh_cold", "devsy_ssh_no_master")}
    for name in ("guest->host", "host->guest"):
        ratios[name] = round(other[name]["devsy_ssh_mb_s"] / agent[name]["devsy_ssh_mb_s"], 2)
    print(f"[{other['path']} {other['image']}] vs [{agent['path']} {agent['image']}]  `devsy ssh true` "
          f"{ratios['devsy_ssh']:.2f}x the time (cold start {ratios['devsy_ssh_cold']:.2f}x, without a master "
          f"{ratios['devsy_ssh_no_master']:.2f}x)   64 MiB guest->host {ratios['guest->host']:.2f}x the rate, "
          f"host->guest {ratios['host->guest']:.2f}x")
    return {"path": other["path"], "image": other["image"], "against": f"{agent['path']} {agent['image']}", **ratios}


def report_layer(seconds: dict[str, float], peer: dict) -> dict:
    """Print the SSH layer's own rates (SshLayer), each against the `docker exec -i` transfer rate (setup excluded)
    of `peer`'s path. Returns them as JSON."""
    result: dict = {"against": f"docker exec -i, setup excluded [{peer['path']} {peer['image']}]"}
    parts = []
    for name in ("guest->host", "host->guest"):
        rate, raw = _rate(seconds[name]), peer[name]["docker_exec_transfer_mb_s"]
        result[name] = {"mb_s": round(rate, 1), "ratio": round(rate / raw, 2)}
        parts.append(f"{name} {rate:6.1f} MiB/s = {rate / raw:4.2f} of docker exec -i ({raw:.1f})")
    print(f"[SSH layer alone: devsy's agent on this host over pipes, no engine, session setup included] 64 MiB "
          f"{'; '.join(parts)}")
    return result


def _delete(ws: Workspace, env: dict[str, str]) -> str | None:
    """Delete the workspace; the error when devsy refuses or its container outlives the delete."""
    done = subprocess.run([*DEVSY, "delete", ws.id], capture_output=True, env=env, timeout=300)
    if done.returncode != 0:
        return f"devsy delete {ws.id} {ws.target.label} exited {done.returncode}: {done.stderr.decode()[-500:]}"
    if ws.container and subprocess.run(["docker", "inspect", ws.container], capture_output=True,
                                       timeout=60).returncode == 0:
        return f"container {ws.container} of {ws.id} {ws.target.label} still exists after devsy delete"
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="devsy-bench-"))
    env = {**os.environ, "DEVSY_HOME": str(work / "home"), "DEVSY_SSH_CONFIG": str(work / "ssh_config")}
    workspaces = [Workspace(t, f"bench-{os.getpid()}-{i}", work / f"project-{i}") for i, t in enumerate(args.paths)]
    data = work / "input.bin"
    data.write_bytes(os.urandom(SIZE))
    created: list[Workspace] = []
    layer: SshLayer | None = None
    try:
        for ws in workspaces:
            created.append(ws)  # before `up`: a failed up may still leave a container or record behind
            _up(ws, env)
        layer = SshLayer(work)
        layer_s = measure(workspaces, layer, env, data, args.runs, args.latency_runs)
    finally:
        errors = [error for ws in reversed(created) if (error := _delete(ws, env))]
        if layer is not None:
            try:
                layer.close()
            except Exception as exc:  # noqa: BLE001 - reported like the other cleanup errors
                errors.append(f"stopping the SSH layer's agent: {exc}")
        shutil.rmtree(work, ignore_errors=True)
        for error in errors:
            print(f"bench: cleanup: {error}", file=sys.stderr)
    load_end = os.getloadavg()

    results = [report(ws) for ws in workspaces]
    agent = next((r for r in results if r["path"] == "agent"), None)
    versus = [compare(agent, r) for r in results if agent is not None and r["path"] != "agent"]
    ssh_layer = report_layer(layer_s, agent or results[0])
    print(f"load average (1, 5, 15 min) at start {' '.join(f'{v:.2f}' for v in load_start)}, at end "
          f"{' '.join(f'{v:.2f}' for v in load_end)}; {os.cpu_count()} cpus; {args.latency_runs} latency runs, "
          f"{args.runs} throughput runs per figure")
    print(json.dumps({"paths": results, "exec_vs_agent": versus, "ssh_layer": ssh_layer, "runs": args.runs,
                      "latency_runs": args.latency_runs,
                      "load_average": {"start": [round(v, 2) for v in load_start],
                                       "end": [round(v, 2) for v in load_end]}, "cpus": os.cpu_count()},
                     sort_keys=True))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
