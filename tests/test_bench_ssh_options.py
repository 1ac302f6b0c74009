"""ci/bench_ssh.py's choice of SSH paths (both paths by default, PATH=IMAGE for another image, mistakes refused), its
interleaving of figures, and its SSH-layer figure (devsy's agent run here over pipes, no engine)."""

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


def test_figures_of_no_workspace_are_taken_once_per_run_after_the_workspaces() -> None:
    order: list[str] = []
    workspaces = [bench.Workspace(bench.Target("agent", "img"), f"ws{i}", Path(f"/p{i}")) for i in range(2)]
    samples = iter([3.0, 1.0, 2.0])
    medians = bench._interleaved(
        workspaces, 3, {"fig": lambda ws: order.append(ws.id) or 1.0},
        once={"layer": lambda: order.append("layer") or next(samples)})
    assert order == ["ws0", "ws1", "layer"] * 3
    assert medians == {"layer": 2.0}
    assert all(ws.medians == {"fig": 1.0} for ws in workspaces)


def test_the_ssh_layer_moves_the_payload_both_ways_and_refuses_a_short_transfer(tmp_path: Path) -> None:
    data = tmp_path / "input.bin"
    data.write_bytes(b"\x01" * bench.SIZE)
    layer = bench.SshLayer(tmp_path)
    try:
        assert layer.down() > 0
        assert layer.up(data) > 0
        with pytest.raises(SystemExit, match="with 10 bytes"):
            layer._session("head -c 10 /dev/zero", None, 11)
    finally:
        layer.close()
    assert layer._proc.returncode == 0  # the agent ended by itself once its client had gone
