"""devsy's real MicrosandboxDriver against the msb simulator (fixtures/msb_sim, a stand-in backed by Docker):
the running-state branches no real microVM can reach on these machines. Simulated: never MicroSandbox evidence."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy.driver.base import ExecRequest, InstanceStatus, Mount, MountType, RunOptions
from devsy.driver.microsandbox.driver import MicrosandboxDriver
from fixtures.msb_sim.docker import LABEL_HOME, sweep, untag_images
from fixtures.msb_sim.state import home_key

SIM = str(Path(sys.executable).with_name("devsy-msb-sim"))
WS = "simws"
KEEP_ALIVE = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"]


@pytest.fixture
def sim_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """MSB_PATH at the stand-in, a private MSB_HOME; afterwards whatever a failed test left is removed (the stand-in's
    own `rm -f`/`volume rm` first, then a sweep by label)."""
    home = Path(tempfile.mkdtemp(prefix="msbsim-", dir="/tmp"))
    monkeypatch.setenv("MSB_PATH", SIM)
    monkeypatch.setenv("MSB_HOME", str(home))
    monkeypatch.delenv("MSB_LIBKRUNFW_PATH", raising=False)
    yield home
    for kind, remove in ((["ls", "-q"], ["rm", "--force"]), (["volume", "ls", "-q"], ["volume", "rm"])):
        listed = subprocess.run([SIM, *kind], capture_output=True, text=True, timeout=60)
        for name in listed.stdout.split():
            subprocess.run([SIM, *remove, name], capture_output=True, timeout=120)
    key = home_key(home)
    sweep(key)
    untag_images(key)
    shutil.rmtree(home, ignore_errors=True)


def _exec(driver: MicrosandboxDriver, argv: list[str], stdin: bytes = b"", **extra: str) -> tuple[int, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    result = driver.exec(WS, ExecRequest(argv=argv, stdout=out, stderr=err, stdin=io.BytesIO(stdin), **extra))
    return result.exit_code, out.getvalue(), err.getvalue()


@pytest.mark.docker
def test_driver_runs_a_sandbox_end_to_end_on_the_simulator(sim_home: Path, busybox_rootfs: Path,
                                                           tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    driver = MicrosandboxDriver()
    options = RunOptions(image=str(busybox_rootfs), cmd=KEEP_ALIVE, env={"GREETING": "hello"},
                         workspace_mount=Mount(MountType.BIND, "/workspaces/project", str(folder)),
                         mounts=[Mount(MountType.VOLUME, "/data", f"{WS}-data")])

    assert driver.run(WS, options).running
    found = driver.find(WS)
    assert found is not None and found.status is InstanceStatus.RUNNING
    assert {(m.type, m.destination) for m in found.mounts} >= {("bind", "/workspaces/project"), ("volume", "/data")}

    payload = bytes(range(256)) * 4096 + b"\r\n\x00tail"  # every byte value, 1 MiB, no line structure
    code, out, err = _exec(driver, ["/bin/sh", "-c", 'cat; printf "to stderr" >&2; exit 23'], payload)
    assert (code, out, err) == (23, payload, b"to stderr")
    code, out, _ = _exec(driver, ["/bin/sh", "-c", 'echo "$GREETING $EXTRA" > written; pwd'],
                         workdir="/workspaces/project", env={"EXTRA": "there"})
    assert (code, out) == (0, b"/workspaces/project\n")
    assert (folder / "written").read_text() == "hello there\n"  # the bind mount reaches the host folder
    assert _exec(driver, ["no-such-command"])[0] == 127

    driver.stop(WS)
    stopped = driver.find(WS)
    assert stopped is not None and stopped.status is InstanceStatus.STOPPED
    driver.start(WS)
    restarted = driver.find(WS)
    assert restarted is not None and restarted.status is InstanceStatus.RUNNING
    assert _exec(driver, ["cat", "/workspaces/project/written"])[1] == b"hello there\n"

    driver.delete(WS)
    assert driver.find(WS) is None
    listed = subprocess.run([SIM, "volume", "ls", "-q"], capture_output=True, text=True, timeout=60, check=True)
    assert listed.stdout == ""  # the volume the driver created went with the sandbox
    containers = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={LABEL_HOME}={home_key(sim_home)}"],
                                capture_output=True, text=True, timeout=60, check=True)
    assert containers.stdout == ""
