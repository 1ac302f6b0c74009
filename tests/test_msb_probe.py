"""The boot probe: a real boot attempt of a tiny rootfs, bounded, with its evidence kept and its sandbox removed."""

from __future__ import annotations

from pathlib import Path

from devsy.driver.microsandbox.probe import probe_boot
from helpers.msb import SessionProbe, sandboxes


def test_probe_reports_a_vm_that_cannot_boot_with_evidence(msb_home: Path, no_boot: Path, busybox_rootfs: Path):
    result = probe_boot(timeout=60)
    assert not result.ok and result.exit_status == 1
    assert result.command.startswith("msb run --name devsy-probe-") and str(busybox_rootfs) in result.command
    assert "msb 0.7.11" in result.output_tail and "libkrunfw" in result.output_tail
    assert 0 < result.duration < 60
    assert sandboxes(msb_home) == []  # torn down


def test_probe_without_msb_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MSB_PATH", str(tmp_path / "no-msb-here"))
    result = probe_boot(timeout=10)
    assert not result.ok and result.exit_status is None and "MSB_PATH" in result.output_tail


def test_probe_on_this_host(session_probe: SessionProbe) -> None:
    """Either outcome is a finding; each must carry its evidence and leave nothing behind.

    The run's one real boot attempt (msb's own libkrunfw, a private MSB_HOME): probe_boot as the harness probe calls
    it, shared with the tests it gates and with the harness probe tests."""
    result = session_probe.result
    assert result.command.startswith("msb run --name devsy-probe-")
    if result.ok:
        assert result.exit_status == 0 and "devsy-probe-ok" in result.output_tail
    else:
        assert "did not boot" in result.output_tail or "did not finish" in result.output_tail, result
        assert "msb doctor" in result.output_tail
    assert session_probe.left_behind == []
