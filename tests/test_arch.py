"""One map of architecture names (devsy.arch), used by the host and, shipped in the agent zipapp, by the guest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devsy.agent.build import guest_sources
from devsy.agent.errors import AgentBuildError
from devsy.agent.lock import normalize_arch as agent_arch
from devsy.arch import MACHINES, SUPPORTED, normalize_arch


@pytest.mark.parametrize(("name", "expected"), [
    ("x86_64", "amd64"), ("amd64", "amd64"), ("AMD64", "amd64"),
    ("aarch64", "arm64"), ("arm64", "arm64"), ("riscv64", "riscv64"),
])
def test_machine_names_map_to_devsys_names(name: str, expected: str) -> None:
    assert normalize_arch(name) == expected


def test_each_supported_arch_has_its_machine_name_and_maps_back() -> None:
    assert sorted(MACHINES) == sorted(SUPPORTED)
    assert all(normalize_arch(MACHINES[arch]) == arch for arch in SUPPORTED)


def test_the_agent_refuses_an_arch_it_cannot_build() -> None:
    assert agent_arch("aarch64") == "arm64"
    with pytest.raises(AgentBuildError, match="riscv64"):
        agent_arch("riscv64")


def test_the_guest_code_as_zipped_normalizes_without_devsy_installed(tmp_path: Path) -> None:
    # The agent's own files as the zipapp carries them; -S -I: no site-packages, so no devsy to fall back on.
    for name, data in guest_sources():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from devsy_agent.runtime_install import platform; "
              "print(platform()[1], 'devsy' in sys.modules)")
    proc = subprocess.run([sys.executable, "-S", "-I", "-c", script, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    import platform as host_platform

    assert proc.stdout.split() == [normalize_arch(host_platform.machine()), "False"]
