"""devsy against the Go implementation it must interoperate with (../shared/interop/bin, built from the Go
devsy-runtime-sdk): the Go SDK's own conformance suite, driven by a Go host, against devsy's providers, and devsy's
conformance suite and host against the Go SDK's fake runtime, in its normal, conformance and failure modes."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.plugin_client import LaunchOptions
from devsy.runtime.host.testing import running, script
from devsy.runtime.wire.errors import HandshakeTimeout, IncompatibleVersion, InvalidProviderInfo, ProviderExited, \
    ProviderUnavailable
from go_interop import require_go_binary

# The Go suite's 16 cases (devsy-runtime-sdk conformance/suite.go); every one must pass, by name.
GO_CASES = ("discovery", "lifecycle", "reuse-preflight", "binary-echo", "empty-stdin", "arguments", "shell", "stderr",
            "large-duplex", "nonzero", "signal", "early-exit", "cancel", "deadline", "malformed-frames", "logs")
GO_SUITE_TIMEOUT_S = 600
CONFORMANCE_TIMEOUT_S = 300
_CASE_LINE = re.compile(r"^    --- (PASS|FAIL|SKIP): TestSDKConformance/([\w-]+) ", re.MULTILINE)
_WORKSPACE_LINE = re.compile(r"workspace (gohost-\d{6}-\d+) for ")


def _go_suite(provider: str, args: list[str], profile: str, *, supervised: bool,
              env: dict[str, str] | None = None) -> tuple[dict[str, str], str]:
    """Run go-conformance.test against `provider ARGS`; (case -> PASS/FAIL/SKIP, the whole -test.v output)."""
    suite = require_go_binary("go-conformance.test")
    extra = {"GOHOST_PROVIDER": provider, "GOHOST_ARGS": "\x1f".join(args), "GOHOST_PROFILE": profile,
             "GOHOST_SUPERVISOR": str(require_go_binary("go-runtime-supervisor")) if supervised else "",
             "GOHOST_ENV": ";".join(f"{k}={v}" for k, v in (env or {}).items())}
    proc = subprocess.run([str(suite), "-test.run", "TestSDKConformance", "-test.v", "-test.timeout", "8m"],
                          capture_output=True, text=True, timeout=GO_SUITE_TIMEOUT_S, env={**os.environ, **extra})
    output = proc.stdout + proc.stderr
    return {name: status for status, name in _CASE_LINE.findall(output)}, output


def _require_all_pass(cases: dict[str, str], output: str) -> None:
    failed = {name: status for name, status in cases.items() if status != "PASS"}
    assert sorted(cases) == sorted(GO_CASES) and not failed, \
        f"not passed: {failed or 'missing cases'}\n{output[-4000:]}"


def _remove_workspaces(docker_client, output: str) -> None:
    """The containers of the workspaces this run named (its ids are in the -test.v log), even after a failure."""
    for ws in set(_WORKSPACE_LINE.findall(output)):
        for container in docker_client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={ws}"}):
            container.remove(force=True, v=True)


@pytest.mark.usefixtures("guest_image")
def test_go_suite_passes_against_the_docker_provider(docker_client) -> None:
    """Under the Go SDK's supervisor and launched directly. One test, the two runs in turn: the Go suite's workspace
    ids are gohost-<HHMMSS>-<n> with n counted per run, so two runs started in the same second must not overlap."""
    for supervised in (True, False):
        output = ""
        try:
            cases, output = _go_suite(script("devsy-provider-docker"), ["serve"], "posix", supervised=supervised,
                                      env={"NETWORK_MODE": "host"})  # this engine has no bridge
            _require_all_pass(cases, output)
        finally:
            _remove_workspaces(docker_client, output)
        assert _WORKSPACE_LINE.search(output), "the Go suite named no workspace: it did not run"


@pytest.mark.parametrize("supervised", [True, False], ids=["go-supervisor", "direct"])
def test_go_suite_passes_against_the_fake_runtime_in_conformance_mode(tmp_path: Path, supervised: bool) -> None:
    """Profile gofake: devsy's fake in `--mode conformance` runs the Go fake's scenario names."""
    cases, output = _go_suite(script("devsy-fake-runtime"), ["serve", "--state-dir", str(tmp_path), "--mode",
                                                             "conformance"], "gofake", supervised=supervised)
    _require_all_pass(cases, output)
    assert not list(tmp_path.glob("*.json")), "the Go suite's workspaces were left in the fake's state"


def _devsy_conformance(*args: str) -> tuple[int, dict[str, str], str]:
    proc = subprocess.run([script("devsy-conformance"), *args], capture_output=True, text=True,
                          timeout=CONFORMANCE_TIMEOUT_S)
    statuses = {}
    for line in proc.stdout.splitlines():
        words = line.split()
        if len(words) > 1 and words[0] in ("PASS", "FAIL", "SKIP", "NOT-OFFERED", "BLOCKED"):
            statuses[words[1]] = words[0]
    return proc.returncode, statuses, proc.stdout + proc.stderr


def _by_status(statuses: dict[str, str], status: str) -> set[str]:
    return {name for name, s in statuses.items() if s == status}


def test_devsy_conformance_against_the_go_fake_in_conformance_mode(tmp_path: Path) -> None:
    fake = require_go_binary("go-fake-runtime")
    code, statuses, output = _devsy_conformance(str(fake), "--state-dir", str(tmp_path), "--mode", "conformance")
    assert "commands: gofake; checks: protocol" in output
    assert not _by_status(statuses, "FAIL"), output
    # What the Go fake does not offer is named, with the reason on the line; never a pass, never a failure.
    assert _by_status(statuses, "NOT-OFFERED") == {"validation/invalid-requests", "exec/malformed-frames",
                                                   "exec/tty-unsupported"}, output
    assert "without a RuntimeError detail" in output and "[A-Za-z0-9_.-]" in output
    assert _by_status(statuses, "SKIP") == {"recreate-on-run"}, output
    assert {"lifecycle", "exec/argument-fidelity", "exec/signal-exit", "exec/cancel", "logs"} <= \
        _by_status(statuses, "PASS"), output
    assert code == 4, output  # nothing failed, some cases not offered: distinct from a pass


def test_devsy_conformance_against_the_go_fake_in_normal_mode(tmp_path: Path) -> None:
    """Outside `conformance` mode the Go fake's Exec only echoes: the cases that need other commands are not
    offered, and everything it does offer passes."""
    fake = require_go_binary("go-fake-runtime")
    code, statuses, output = _devsy_conformance(str(fake), "--state-dir", str(tmp_path), "--mode", "normal")
    assert "commands: echo" in output and not _by_status(statuses, "FAIL"), output
    assert {"info", "discovery", "lifecycle", "reuse-preflight", "exec/binary-echo", "exec/empty-stdin",
            "exec/full-duplex-12mib", "logs"} <= _by_status(statuses, "PASS"), output
    assert "exec/signal-exit" in _by_status(statuses, "NOT-OFFERED") and "has no signal command" in output
    assert code == 4, output


# The Go fake's failure modes: each reaches devsy's host as its own typed error, with an actionable message.
FAILURE_MODES = [
    ("incompatible-version", [], IncompatibleVersion, "speaks runtime API 2"),
    ("malformed-info", [], InvalidProviderInfo, "driver_name"),
    ("crash-before-handshake", [], ProviderExited, "exited before completing the handshake"),
    ("crash-after-handshake", [], ProviderUnavailable, "became unavailable during Info"),
    ("delay-handshake", ["--handshake-delay", "600s"], HandshakeTimeout, "did not complete the handshake within"),
]


@pytest.mark.parametrize(("mode", "extra", "error", "message"), FAILURE_MODES, ids=[m[0] for m in FAILURE_MODES])
def test_go_fake_failure_modes_are_typed_host_errors(tmp_path: Path, mode: str, extra: list[str], error: type,
                                                     message: str) -> None:
    command = ProviderCommand(binary=str(require_go_binary("go-fake-runtime")),
                              args=["--state-dir", str(tmp_path), "--mode", mode, *extra])
    with pytest.raises(error, match=message) as caught:
        with running(command, LaunchOptions(handshake_timeout=5)) as provider:
            provider.client.info()
    assert caught.value.hint and "Traceback" not in caught.value.message
    # devsy-conformance fails such a provider once, at launch, with the same message.
    code, statuses, output = _devsy_conformance("--handshake-timeout", "5", command.binary, *command.args)
    assert code == 1 and statuses == {"launch:": "FAIL"}, output  # no case ran
    assert re.search(rf"^FAIL  launch: provider go-fake-runtime .*{re.escape(message)}", output, re.MULTILINE), output
