"""The one reading of a reported signal into a shell's exit status, for `devsy exec` and `devsy ssh` alike."""

from __future__ import annotations

import pytest

from devsy.driver.base import ExecResult
from devsy.exit_status import shell_status, signal_number
from devsy.ssh.mux.protocol import exit_code_for


@pytest.mark.parametrize("name", ["TERM", "SIGTERM", "term"])
def test_both_spellings_name_the_same_signal(name: str) -> None:
    # OpenSSH sends "TERM"; devsy's providers send "SIGTERM"; Go-built ones may send either.
    assert signal_number(name) == 15
    assert exit_code_for(None, name) == 143
    assert shell_status(ExecResult(exit_code=0, signal=name)) == 143


def test_an_unknown_signal_is_255_for_ssh_and_keeps_a_nonzero_code_for_exec() -> None:
    assert signal_number("NOPE") is None
    assert exit_code_for(7, "NOPE") == 255
    assert shell_status(ExecResult(exit_code=0, signal="NOPE")) == 255
    assert shell_status(ExecResult(exit_code=9, signal="NOPE")) == 9


def test_no_signal_is_the_status_and_no_status_is_255() -> None:
    assert exit_code_for(3, "") == 3
    assert exit_code_for(None, "") == 255
    assert shell_status(ExecResult(exit_code=3)) == 3
