"""The external driver behind the real CLI (`--provider external-docker`) and its recreate negotiation."""

from __future__ import annotations

import io
from pathlib import Path

import psutil
import pytest

from helpers.engine import containers_of
from helpers.projects import make_project
from devsy.driver.base import ExecRequest, RunOptions
from devsy.driver.external.driver import ExternalDriver
from devsy.driver.registry import make_driver
from devsy.errors import AlreadyExists
from devsy.runtime.wire.errors import InvalidProviderInfo
from devsy.runtime.host.testing import fake_command

EXTERNAL = ["--provider", "external-docker", "--provider-option", "NETWORK_MODE=host"]


@pytest.mark.usefixtures("guest_image")
def test_cli_lifecycle_through_the_external_docker_provider(devsy, ws_id: str, tmp_path: Path, docker_client,
                                                            guest_image: str) -> None:
    devsy.env["DEVSY_TEST_MARK"] = ws_id  # inherited by providers: lets us find ours among parallel tests'
    project = make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "dev"})
    first = devsy.up(project, "--id", ws_id, *EXTERNAL).json["workspace"]
    assert first["provider"] == "external-docker" and first["status"] == "running"
    result = devsy.run("exec", ws_id, "--", "sh", "-c", "printf '\\000\\377'; id -un >&2; exit 5")
    assert (result.returncode, result.stdout, result.stderr) == (5, b"\x00\xff", b"dev\n")
    again = devsy.up(project, "--id", ws_id).json["workspace"]
    assert again["reused"] and again["instance"]["id"] == first["instance"]["id"]

    make_project(project, {"image": guest_image, "remoteUser": "alt"})
    refused = devsy.up(project, "--id", ws_id, ok=False)
    assert refused.returncode != 0 and refused.json["error"]["type"] == "recreate-required"
    assert [c.id for c in containers_of(docker_client, ws_id)] == [first["instance"]["id"]]

    recreated = devsy.up(project, "--id", ws_id, "--recreate").json["workspace"]
    assert recreated["instance"]["id"] != first["instance"]["id"] and recreated["remote_user"] == "alt"
    assert devsy.run("delete", ws_id, "--json").returncode == 0
    assert containers_of(docker_client, ws_id) == []
    assert _marked_processes(ws_id) == [], "a provider or supervisor outlived the CLI"


def _marked_processes(mark: str) -> list[str]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("DEVSY_TEST_MARK") == mark and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(" ".join(proc.cmdline()))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _fake_driver(tmp_path: Path, *args: str) -> ExternalDriver:
    return ExternalDriver("external:devsy-fake-runtime", fake_command(tmp_path, *args))


@pytest.mark.parametrize("profile", ["default", "recreate"])
def test_recreate_uses_on_run_when_offered_and_delete_otherwise(tmp_path: Path, profile: str) -> None:
    driver = _fake_driver(tmp_path, "--profile", profile)
    try:
        assert driver.description.recreate_on_run is (profile == "recreate")
        old = driver.run("ws", RunOptions(image="img"))
        with pytest.raises(AlreadyExists):
            driver.run("ws", RunOptions(image="img"))  # no --recreate: never replaced
        new = driver.run("ws", RunOptions(image="img", allow_recreate=True))
        assert new.id != old.id and new.running
        out = io.BytesIO()
        assert driver.exec("ws", ExecRequest(argv=["echo", "hi"], stdout=out, stderr=io.BytesIO())).exit_code == 0
        assert out.getvalue() == b"hi\n"
    finally:
        driver.close()


def test_invalid_info_is_refused_before_anything_is_touched(tmp_path: Path) -> None:
    with pytest.raises(InvalidProviderInfo):
        make_driver("external:devsy-fake-runtime",
                    {"DEVSY_FAKE_STATE_DIR": str(tmp_path), "DEVSY_FAKE_MODE": "malformed-info"})
    assert not list(tmp_path.iterdir())


def test_grpc_is_loaded_only_once_the_provider_is_starting(tmp_path: Path) -> None:
    """The host loads gRPC while the provider starts on another core, not before it (driver/external/driver.py):
    making the external driver imports none of it; its first call launches the provider, loads gRPC and connects."""
    import json
    import subprocess
    import sys

    command = fake_command(tmp_path)
    probe = ("import json, sys\n"
             "from devsy.driver.external.driver import ExternalDriver\n"
             "from devsy.runtime.host.launcher import ProviderCommand\n"
             "def grpc_modules(): return sorted(m for m in sys.modules if m.startswith(('grpc', 'google.protobuf')))\n"
             "driver = ExternalDriver('fake', ProviderCommand(binary=sys.argv[1], args=sys.argv[2:]))\n"
             "before = grpc_modules()\n"
             "driver.open_backend()\n"
             "print(json.dumps([before, grpc_modules() != [], driver.description.capabilities.logs]))\n"
             "driver.close()\n")
    before, loaded, has_logs = json.loads(subprocess.run([sys.executable, "-c", probe, command.binary, *command.args],
                                                         capture_output=True, check=True, timeout=120).stdout)
    assert before == [] and loaded and has_logs
