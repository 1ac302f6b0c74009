"""The conformance suite's signal case checks which signal is named: the command it sends is killed by SIGTERM, so a
provider that names another signal (or an unknown one) fails the case, and SIGTERM with or without `SIG` passes. The
fakes get their scenario table for `--mode conformance` however the flag is spelled."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from devsy.runtime.conformance import commands as c
from devsy.runtime.conformance.main import CASES, run_case
from devsy.runtime.conformance.session import Session, Target
from devsy.runtime.host.testing import fake_command

SIGNAL_CASE = next(case for case in CASES if case.name == "exec/signal-exit")


@pytest.mark.parametrize(("reported", "status"), [(["signal", "SIGTERM"], "PASS"), (["signal-only", "TERM"], "PASS"),
                                                  (["signal", "SIGKILL"], "FAIL"), (["signal-only", "HUP"], "FAIL")],
                         ids=["SIGTERM", "TERM", "SIGKILL", "HUP"])
def test_the_signal_case_requires_sigterm(tmp_path: Path, reported: list[str], status: str) -> None:
    # devsy-fake-runtime's `signal NAME` reports 128+N and NAME; `signal-only NAME` the name with exit_code 0.
    table = replace(c.TABLES["pyfake"], signal=reported)
    session = Session(Target(command=fake_command(tmp_path), image="img", commands=table))
    session.launch()
    try:
        outcome = run_case(session, SIGNAL_CASE)
    finally:
        session.cleanup()
        session.close()
    assert outcome.status == status, outcome


@pytest.mark.parametrize("mode", [["--mode", "conformance"], ["--mode=conformance"], ["-mode", "conformance"],
                                  ["-mode=conformance"]], ids=["--mode X", "--mode=X", "-mode X", "-mode=X"])
def test_the_fakes_scenario_table_is_chosen_for_every_spelling_of_mode(mode: list[str]) -> None:
    # argparse (devsy-fake-runtime) and Go's flag package (go-fake-runtime) both take these forms.
    assert c.default_table("/bin/devsy-fake-runtime", ["serve", "--state-dir", "/x", *mode]) == "gofake"
    assert c.default_table("/bin/go-fake-runtime", ["--state-dir", "/x", *mode]) == "gofake"
    assert c.default_table("/bin/go-fake-runtime", ["--state-dir", "/x", "--mode", "normal"]) == "echo"
