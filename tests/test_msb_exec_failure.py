"""A failure of msb itself during `msb exec` (the sandbox stopped or vanished under the command) is a typed error,
never the guest's exit status; a guest that prints an msb-like `error:` line and exits 1 still exits 1. Through the
msb simulator (fixtures/msb_sim, a stand-in backed by Docker): it proves devsy's logic, not MicroSandbox."""

from __future__ import annotations

import io
import subprocess
import threading
from pathlib import Path

import pytest

from devsy.driver.base import ExecRequest, ExecResult, RunOptions
from devsy.driver.microsandbox.driver import MicrosandboxDriver
from devsy.driver.microsandbox.exec_outcome import ExecInterrupted
from devsy.driver.microsandbox.naming import sandbox_name
from devsy.errors import DevsyError, NotFound
from test_msb_sim_driver import KEEP_ALIVE, SIM, WS, sim_home  # noqa: F401 - sim_home is a fixture

pytestmark = pytest.mark.docker
DEADLINE_S = 120.0


class _Watch(io.RawIOBase):
    """A stdout that records what it was given and says when a marker arrived."""

    def __init__(self, marker: bytes) -> None:
        super().__init__()
        self.marker, self.data, self.seen = marker, b"", threading.Event()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        self.data += bytes(data)
        if self.marker in self.data:
            self.seen.set()
        return len(data)


@pytest.fixture
def driver(sim_home: Path, busybox_rootfs: Path) -> MicrosandboxDriver:  # noqa: F811
    driver = MicrosandboxDriver()
    assert driver.run(WS, RunOptions(image=str(busybox_rootfs), cmd=KEEP_ALIVE)).running
    return driver


def _exec(driver: MicrosandboxDriver, script: str) -> tuple[int, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    result = driver.exec(WS, ExecRequest(argv=["/bin/sh", "-c", script], stdout=out, stderr=err))
    return result.exit_code, out.getvalue(), err.getvalue()


def test_a_guest_that_prints_an_msb_like_error_and_exits_1_is_exit_status_1(driver: MicrosandboxDriver) -> None:
    script = 'echo "error: sandbox not found: devsy-other" >&2; echo "  → detail" >&2; exit 1'
    assert _exec(driver, script) == (1, b"", b"error: sandbox not found: devsy-other\n  \xe2\x86\x92 detail\n")
    assert _exec(driver, 'echo "error: x" >&2; exit 3') == (3, b"", b"error: x\n")


def test_a_guest_command_killed_by_a_signal_keeps_its_status(driver: MicrosandboxDriver) -> None:
    assert _exec(driver, "kill -KILL $$") == (137, b"", b"")  # the sandbox still runs: the guest's own status


def _interrupt(driver: MicrosandboxDriver, outside: list[str]) -> BaseException:
    """Run a long command, do `outside` (an msb command) once the guest has started it; what exec raised."""
    stdout = _Watch(b"started\n")
    outcome: list[ExecResult | BaseException] = []

    def run() -> None:
        try:
            outcome.append(driver.exec(WS, ExecRequest(argv=["/bin/sh", "-c", "echo started; exec sleep 600"],
                                                       stdout=stdout, stderr=io.BytesIO())))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=run, name="test-exec")
    worker.start()
    try:
        assert stdout.seen.wait(DEADLINE_S), f"the guest never started the command; stdout: {stdout.data!r}"
        subprocess.run([SIM, *outside, sandbox_name(WS)], check=True, capture_output=True, timeout=DEADLINE_S)
    finally:
        worker.join(DEADLINE_S)
    assert not worker.is_alive(), "exec did not return after its sandbox was stopped"
    assert len(outcome) == 1 and isinstance(outcome[0], BaseException), f"exec returned {outcome!r}"
    return outcome[0]


def test_a_sandbox_stopped_during_exec_is_a_typed_error_not_an_exit_status(driver: MicrosandboxDriver) -> None:
    error = _interrupt(driver, ["stop", "--force"])
    assert isinstance(error, ExecInterrupted), repr(error)
    assert f"sandbox {sandbox_name(WS)} stopped while a command ran in it" in error.message
    assert "now stopped" in error.message and "devsy start" in error.hint


def test_a_sandbox_removed_during_exec_is_a_typed_error(driver: MicrosandboxDriver) -> None:
    error = _interrupt(driver, ["rm", "--force"])
    # The removal and devsy's inspect race: seen mid-removal the sandbox is stopped, after it gone. Either is msb's
    # failure, typed and naming the sandbox; never the guest's status.
    assert isinstance(error, (NotFound, ExecInterrupted)), repr(error)
    assert isinstance(error, DevsyError) and sandbox_name(WS) in error.message
