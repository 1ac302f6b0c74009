"""ci/bench_ssh.py's choice of SSH paths: both paths by default, PATH=IMAGE for another image, mistakes refused."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "ci" / "bench_ssh.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_ssh", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_ssh"] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


bench = _load()


def test_default_measures_the_agent_and_the_exec_path_each_on_an_image_of_its_kind() -> None:
    args = bench.parse_args([])
    assert args.paths == [bench.Target("agent", "devsy-guest:bookworm"),
                          bench.Target("exec", "devsy-guest-nopython:bookworm")]


def test_path_with_image_adds_a_target_in_the_order_given() -> None:
    args = bench.parse_args(["--paths", "exec,exec=devsy-guest-busybox:bookworm,agent"])
    assert [(t.path, t.image) for t in args.paths] == [("exec", "devsy-guest-nopython:bookworm"),
                                                       ("exec", "devsy-guest-busybox:bookworm"),
                                                       ("agent", "devsy-guest:bookworm")]
    assert args.paths[1].label == "[exec devsy-guest-busybox:bookworm]"


@pytest.mark.parametrize("spec, says", [("agent,ssh", "unknown SSH path 'ssh'"),
                                        ("agent,agent=devsy-guest:bookworm", "listed twice"),
                                        ("", "unknown SSH path ''")])
def test_cli_refuses_a_path_it_cannot_label_before_creating_anything(spec: str, says: str) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--paths", spec], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr


def test_cli_refuses_zero_runs() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--runs", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "at least 1" in proc.stderr
