"""Benchmark: reused `devsy up` and `devsy exec -- true` against the reference devcontainer CLI and raw docker exec.

Prints median wall times and ratios measured in one run on this machine. The reference CLI is npm's
@devcontainers/cli, installed into a cache folder on first use. Usage: python ci/bench_docker.py [--runs N]
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

from fixtures.guest_image import ensure_guest_image

DEVCONTAINER_CLI_DIR = Path.home() / ".cache" / "devsy" / "devcontainers-cli"


def devcontainer_cli() -> Path:
    binary = DEVCONTAINER_CLI_DIR / "node_modules" / ".bin" / "devcontainer"
    if not binary.exists():
        DEVCONTAINER_CLI_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--prefix", str(DEVCONTAINER_CLI_DIR), "@devcontainers/cli"],
                       check=True, timeout=600)
    return binary


def median_time(argv: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=120)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    image = ensure_guest_image(progress=lambda *_: None).tag
    cli = devcontainer_cli()
    work = Path(tempfile.mkdtemp(prefix="devsy-bench-"))
    project = work / "bench"
    (project / ".devcontainer").mkdir(parents=True)
    (project / ".devcontainer" / "devcontainer.json").write_text(json.dumps({"image": image}))
    env = {**os.environ, "DEVSY_HOME": str(work / "home"), "DEVSY_SSH_CONFIG": str(work / "ssh_config")}
    devsy = [sys.executable, "-m", "devsy"]
    try:
        subprocess.run([*devsy, "up", str(project), "--id", "bench", "--provider-option", "NETWORK_MODE=host"],
                       check=True, env=env, stdout=subprocess.DEVNULL, timeout=300)
        up = json.loads(subprocess.run([str(cli), "up", "--workspace-folder", str(project)], check=True,
                                       capture_output=True, env=env, timeout=300).stdout.splitlines()[-1])
        container = up["containerId"]
        figures = {
            "devsy up (reused)": median_time([*devsy, "up", str(project), "--id", "bench"], args.runs, env),
            "devcontainer up (reused)": median_time([str(cli), "up", "--workspace-folder", str(project)],
                                                    args.runs, env),
            "devsy exec true": median_time([*devsy, "exec", "bench", "--", "true"], args.runs, env),
            "devcontainer exec true": median_time([str(cli), "exec", "--workspace-folder", str(project), "true"],
                                                  args.runs, env),
            "docker exec true": median_time(["docker", "exec", container, "true"], args.runs, env),
        }
    finally:
        subprocess.run([*devsy, "delete", "bench"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)
        subprocess.run(["docker", "rm", "-f", *subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=devcontainer.local_folder={project}"],
            capture_output=True, text=True).stdout.split()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
    print(f"median wall time over {args.runs} runs (seconds)")
    for name, seconds in figures.items():
        print(f"  {name:28s} {seconds:.3f}")
    print("ratios (lower is better for devsy)")
    print(f"  devsy up / devcontainer up     {figures['devsy up (reused)'] / figures['devcontainer up (reused)']:.2f}")
    print(f"  devsy exec / devcontainer exec {figures['devsy exec true'] / figures['devcontainer exec true']:.2f}")
    print(f"  devsy exec / docker exec       {figures['devsy exec true'] / figures['docker exec true']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
