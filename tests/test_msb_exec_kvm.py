"""Exec, logs and stop/start on a booted microVM. These need a host whose KVM can boot guests (the KVM CI runners);
elsewhere each test is skipped with the boot probe's evidence."""

from __future__ import annotations

import io
import os
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy.driver.base import CancelToken, ExecRequest, RunOptions
from devsy.driver.microsandbox.driver import MicrosandboxDriver
from helpers.msb import skip_unless_boots

WORKLOAD = "echo devsy-workload-started; while sleep 1000; do :; done"


@pytest.fixture
def running(boot_probe, msb_home: Path, busybox_rootfs: Path) -> Iterator[tuple[MicrosandboxDriver, str]]:
    skip_unless_boots(boot_probe)
    driver, workspace_id = MicrosandboxDriver(), f"kvm-{secrets.token_hex(4)}"
    driver.run(workspace_id, RunOptions(image=str(busybox_rootfs), entrypoint=["/bin/sh"], cmd=["-c", WORKLOAD]))
    try:
        yield driver, workspace_id
    finally:
        driver.delete(workspace_id)


def _exec(driver: MicrosandboxDriver, workspace_id: str, argv: list[str], stdin: bytes | None = None, **kw):
    out, err = io.BytesIO(), io.BytesIO()
    request = ExecRequest(argv=argv, stdout=out, stderr=err, stdin=io.BytesIO(stdin) if stdin is not None else None,
                          **kw)
    return driver.exec(workspace_id, request).exit_code, out.getvalue(), err.getvalue()


def test_binary_input_round_trips_exactly(running) -> None:
    data = bytes([0x00, 0xFF, 0x80, 0x0A, 0x0D, 0x01]) + os.urandom(1024 * 1024)
    assert _exec(*running, ["cat"], data) == (0, data, b"")


def test_streams_stay_separate_and_exit_codes_pass_through(running) -> None:
    assert _exec(*running, ["/bin/sh", "-c", "printf out; printf err >&2; exit 7"]) == (7, b"out", b"err")
    assert _exec(*running, ["no-such-command-here"])[0] == 127
    assert _exec(*running, ["/bin/sh", "-c", 'echo "$FOO"; pwd'], env={"FOO": "a b$c"}, workdir="/tmp")[:2] == (
        0, b"a b$c\n/tmp\n")


class _Signal(io.BytesIO):
    """A stdout that announces its first write: the test cancels only once the command is known to run."""

    def __init__(self) -> None:
        super().__init__()
        self.wrote = threading.Event()

    def write(self, data) -> int:  # noqa: ANN001
        self.wrote.set()
        return super().write(data)


def test_cancel_stops_the_command_and_keeps_the_workspace(running) -> None:
    driver, workspace_id = running
    out = _Signal()
    request = ExecRequest(argv=["/bin/sh", "-c", "echo ready; exec sleep 1000"], stdout=out, stderr=io.BytesIO(),
                          cancel=CancelToken())
    threading.Thread(target=lambda: out.wrote.wait(120) and request.cancel.cancel(), daemon=True).start()
    started = time.monotonic()
    assert driver.exec(workspace_id, request).exit_code == 130
    assert time.monotonic() - started < 60 and out.getvalue() == b"ready\n"
    assert driver.find(workspace_id).running
    assert _exec(driver, workspace_id, ["true"])[0] == 0


def test_logs_stop_and_start(running) -> None:
    driver, workspace_id = running
    logs = io.BytesIO()
    driver.logs(workspace_id, logs)
    assert b"devsy-workload-started" in logs.getvalue()
    driver.stop(workspace_id)
    assert not driver.find(workspace_id).running
    driver.stop(workspace_id)
    driver.start(workspace_id)
    driver.start(workspace_id)
    assert driver.find(workspace_id).running
