"""A provider is launched with exactly the arguments its definition declares: nothing is added (the protocol has no
`serve` convention). devsy's own providers declare `serve` in their rows and serve without it when a host starts them
with none; `external:PATH` takes its arguments from the ARGS option; a secret among them shows in no devsy output.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from devsy.driver.external.providers import provider_command
from devsy.errors import UsageError
from devsy.runtime.fake.modes import ENV_MODE, Mode
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.plugin_client import HandshakeConfig, LaunchOptions, PluginClient
from devsy.runtime.host.testing import running, script
from devsy.runtime.wire.errors import CookieRejected, ProviderExited
from go_interop import require_go_binary
from helpers.cli import DevsyCli
from helpers.projects import make_project

ARGV_PROVIDER = Path(__file__).parent / "helpers" / "argv_provider.py"
SECRET = "launch-arg-secret-5e0c2a"
DECLARED = [f"--token={SECRET}", "two words", "", "plain"]
CONFORMANCE_TIMEOUT_S = 300
# go-plugin's refusal (server.go), as go-fake-runtime prints it on stderr when the cookie is missing or wrong.
GO_PLUGIN_REFUSAL = ("This binary is a plugin. These are not meant to be executed directly.\n"
                     "Please execute the program that consumes these plugins, which will\n"
                     "load any plugins automatically\n")
WRONG_COOKIE = LaunchOptions(handshake=HandshakeConfig(cookie_value="someone-else"))


def _argv_provider(tmp_path: Path) -> Path:
    """An executable that hands its argv, untouched, to the recording provider."""
    binary = tmp_path / "argv-provider"
    binary.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(ARGV_PROVIDER))} \"$@\"\n")
    binary.chmod(0o755)
    return binary


def _launches(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def _options(tmp_path: Path, mode: Mode, args: str) -> list[str]:
    return ["--provider-option", f"ARGS={args}",
            "--provider-option", f"DEVSY_FAKE_STATE_DIR={tmp_path / 'state'}",
            "--provider-option", f"{ENV_MODE}={mode.value}",
            "--provider-option", f"ARGV_RECORD={tmp_path / 'argv.jsonl'}"]


def test_go_fake_runtime_launches_with_its_own_flags_only(tmp_path: Path) -> None:
    go_fake = require_go_binary("go-fake-runtime")
    proc = subprocess.run([script("devsy-conformance"), "--only", "info", "--only", "discovery", str(go_fake),
                           "--state-dir", str(tmp_path), "--mode", "normal"],
                          capture_output=True, text=True, timeout=CONFORMANCE_TIMEOUT_S)
    assert "FAIL  launch" not in proc.stdout, proc.stdout + proc.stderr  # `serve` first: Go's flags stop, exit 2
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("2 passed, 0 failed, 0 skipped"), proc.stdout


def test_external_declared_args_reach_the_provider_exactly_and_stay_secret(devsy: DevsyCli, ws_id: str,
                                                                           tmp_path: Path, guest_image: str) -> None:
    provider = f"external:{_argv_provider(tmp_path)}"
    project = make_project(tmp_path / "p", {"image": guest_image})
    up = devsy.up(project, "--id", ws_id, "--provider", provider,
                  *_options(tmp_path, Mode.NO_AGENT_TOOLS, shlex.join(DECLARED)))
    deleted = devsy.run("delete", ws_id, "--json")  # a later command: the record keeps the provider's arguments
    assert deleted.returncode == 0, deleted.text
    launches = _launches(tmp_path / "argv.jsonl")
    assert len(launches) >= 2, launches  # `up` and `delete` each launched it
    assert all(launch == {"argv": DECLARED, "ARGS": None} for launch in launches), launches
    for result in (up, deleted):
        assert SECRET not in result.text


def _record(devsy: DevsyCli, ws_id: str) -> Path:
    return devsy.home / "workspaces" / ws_id / "workspace.json"


def test_a_workspace_recorded_before_args_keeps_its_serve_launch(devsy: DevsyCli, ws_id: str, tmp_path: Path,
                                                                  guest_image: str) -> None:
    """The previous devsy launched `external:PATH` as `PATH serve` and recorded no ARGS: a provider written to that
    contract must still serve the workspaces it made (stop, delete)."""
    provider = f"external:{_argv_provider(tmp_path)}"
    devsy.up(make_project(tmp_path / "p", {"image": guest_image}), "--id", ws_id, "--provider", provider,
             *_options(tmp_path, Mode.NO_AGENT_TOOLS, "serve"))
    record = json.loads(_record(devsy, ws_id).read_text())
    del record["provider_options"]["ARGS"]  # the record exactly as the previous devsy wrote it
    _record(devsy, ws_id).write_text(json.dumps(record))
    (tmp_path / "argv.jsonl").unlink()
    for command in ("stop", "delete"):
        result = devsy.run(command, ws_id, "--json")
        assert result.returncode == 0, result.text
    assert [launch["argv"] for launch in _launches(tmp_path / "argv.jsonl")] == [["serve"], ["serve"]]


def test_a_new_workspace_without_args_is_recorded_without_arguments(devsy: DevsyCli, ws_id: str, tmp_path: Path,
                                                                    guest_image: str) -> None:
    """A record made now says ARGS even when empty, so it is never read as one from before ARGS existed."""
    options = _options(tmp_path, Mode.NO_AGENT_TOOLS, "")[2:]  # all but ARGS
    devsy.up(make_project(tmp_path / "p", {"image": guest_image}), "--id", ws_id, "--provider",
             f"external:{_argv_provider(tmp_path)}", *options)
    assert json.loads(_record(devsy, ws_id).read_text())["provider_options"]["ARGS"] == ""
    assert devsy.run("delete", ws_id, "--json").returncode == 0
    assert {tuple(launch["argv"]) for launch in _launches(tmp_path / "argv.jsonl")} == {()}


def test_a_secret_argument_is_masked_in_the_launch_error(devsy: DevsyCli, ws_id: str, tmp_path: Path,
                                                         guest_image: str) -> None:
    provider = f"external:{_argv_provider(tmp_path)}"
    project = make_project(tmp_path / "p", {"image": guest_image})
    failed = devsy.up(project, "--id", ws_id, "--provider", provider, ok=False,
                      *_options(tmp_path, Mode.CRASH_BEFORE_HANDSHAKE, shlex.join(DECLARED)))
    error = failed.json["error"]
    assert (failed.returncode, error["type"]) == (ProviderExited.exit_code, ProviderExited.kind), failed.text
    assert "argv-provider started with: ***" in error["message"], error  # its stderr, every argument masked
    assert SECRET not in failed.text
    assert [launch["argv"] for launch in _launches(tmp_path / "argv.jsonl")] == [DECLARED]


def test_unsplittable_args_are_a_usage_error_that_does_not_echo_them(devsy: DevsyCli, ws_id: str,
                                                                      tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"image": "devsy-guest:bookworm"})
    failed = devsy.up(project, "--id", ws_id, "--provider", f"external:{_argv_provider(tmp_path)}", ok=False,
                      *_options(tmp_path, Mode.NORMAL, f"--token={SECRET} 'unclosed"))
    error = failed.json["error"]
    assert (failed.returncode, error["type"]) == (UsageError.exit_code, UsageError.kind), failed.text
    assert "ARGS cannot be split into arguments: No closing quotation" in error["message"]
    assert SECRET not in failed.text
    assert _launches(tmp_path / "argv.jsonl") == [], "a provider was launched with arguments devsy could not split"


@pytest.mark.parametrize("declared", [(), ("serve",)], ids=["no arguments", "serve"])
def test_devsy_providers_serve_with_what_is_declared(tmp_path: Path, declared: tuple[str, ...]) -> None:
    # `external:$(which devsy-fake-runtime)` declares no arguments: a go-plugin host's way; its row-less `serve` too.
    options = {"DEVSY_FAKE_STATE_DIR": str(tmp_path)}
    if declared:
        options["ARGS"] = shlex.join(declared)
    command = provider_command(f"external:{script('devsy-fake-runtime')}", options)
    assert command.args == list(declared)
    with running(command) as p:
        assert p.client.info().driver_name == "fake"
        (provider,) = psutil.Process(p.plugin.provider.process.pid).children()
        cmdline = provider.cmdline()
        assert cmdline[cmdline.index(script("devsy-fake-runtime")) + 1:] == list(declared), cmdline


def test_devsy_provider_rows_declare_serve() -> None:
    assert provider_command("external-docker", {"NETWORK_MODE": "host"}).args == ["serve"]
    assert provider_command("external-microsandbox", {}).args == ["serve"]


def test_go_plugins_multi_line_refusal_is_a_cookie_rejection(tmp_path: Path) -> None:
    refusing = tmp_path / "go-style-refusal"
    refusing.write_text(f"#!/bin/sh\nprintf %s {shlex.quote(GO_PLUGIN_REFUSAL)} >&2\nexit 1\n")
    refusing.chmod(0o755)
    with pytest.raises(CookieRejected, match="did not get the magic cookie") as info:
        PluginClient.launch(ProviderCommand(binary=str(refusing)))
    assert "load any plugins automatically" in info.value.message  # its own words, from the stderr tail


def test_go_fake_runtime_refusing_a_wrong_cookie_is_a_cookie_rejection(tmp_path: Path) -> None:
    go_fake = require_go_binary("go-fake-runtime")
    with pytest.raises(CookieRejected, match="did not get the magic cookie") as info:
        PluginClient.launch(ProviderCommand(binary=str(go_fake), args=["--state-dir", str(tmp_path)]), WRONG_COOKIE)
    assert "This binary is a plugin." in info.value.message
