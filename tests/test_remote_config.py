"""The remote machine provider's config and exec command: accepted shapes, and refusals that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from devsy.driver.registry import make_driver, validate_provider
from devsy.driver.remote.config import CONFIG_OPTION, parse_remote_options
from devsy.driver.remote.driver import RemoteDriver
from devsy.driver.remote.errors import ProviderConfigError
from devsy.driver.remote.transport import ExecTransport

SHA = "ab" * 32


def config(**overrides: object) -> dict:
    base = {
        "name": "remote-docker",
        "agent": {"local": False},
        "exec": {"command": ["docker", "exec", "-i", "host-1"]},
        "runtime": "DOCKER_PROVIDER",
        "binaries": {"DOCKER_PROVIDER": [{"os": "linux", "arch": "amd64", "url": "http://127.0.0.1:1/p",
                                          "sha256": SHA}]},
        "options": {"NETWORK_MODE": "host", "STOP_TIMEOUT": "5"},
    }
    base.update(overrides)
    return base


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "provider.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_valid_config_and_option_overrides(tmp_path):
    path = write(tmp_path, config())
    selection = parse_remote_options({CONFIG_OPTION: str(path), "STOP_TIMEOUT": "9"})
    assert selection.config.exec_command == ("docker", "exec", "-i", "host-1")
    assert selection.runtime_env == {"NETWORK_MODE": "host", "STOP_TIMEOUT": "9"}  # --provider-option wins
    assert selection.config.binaries_json()["DOCKER_PROVIDER"][0]["sha256"] == SHA
    driver = make_driver("remote", {CONFIG_OPTION: str(path)})
    assert isinstance(driver, RemoteDriver) and driver.name == "remote"


@pytest.mark.parametrize(("change", "field"), [
    ({"agent": {"local": True}}, "agent.local"),
    ({"exec": {"command": []}}, "exec.command"),
    ({"runtime": "OTHER"}, "runtime"),
    ({"binaries": {"DOCKER_PROVIDER": [{"os": "linux", "arch": "amd64", "url": "http://x", "sha256": "abc"}]}},
     "binaries.DOCKER_PROVIDER[0].sha256"),
    ({"binaries": {"DOCKER_PROVIDER": [{"os": "linux", "arch": "amd64", "url": "ftp://x", "sha256": SHA}]}},
     "binaries.DOCKER_PROVIDER[0].url"),
    ({"binaries": {"../x": [{"os": "linux", "arch": "amd64", "url": "http://x", "sha256": SHA}]}}, "binaries.../x"),
])
def test_a_bad_field_is_refused_by_name_before_anything_runs(tmp_path, change, field):
    path = write(tmp_path, config(**change))
    with pytest.raises(ProviderConfigError) as caught:
        validate_provider("remote", {CONFIG_OPTION: str(path)})
    assert f"{path}: {field} " in caught.value.message
    assert caught.value.kind == "provider-config" and caught.value.exit_code == 2


def test_the_config_path_must_be_given_and_absolute(tmp_path):
    with pytest.raises(ProviderConfigError, match=f"needs --provider-option {CONFIG_OPTION}=FILE"):
        parse_remote_options({})
    with pytest.raises(ProviderConfigError, match="not an absolute path"):
        parse_remote_options({CONFIG_OPTION: "provider.yaml"})
    with pytest.raises(ProviderConfigError, match="cannot read provider config"):
        parse_remote_options({CONFIG_OPTION: str(tmp_path / "missing.yaml")})


def test_exec_command_appends_argv_or_fills_the_command_placeholder():
    argv = ["/bin/sh", "-c", "echo 'a b'", "x y"]
    assert ExecTransport(["docker", "exec", "-i", "h"]).argv(argv) == ["docker", "exec", "-i", "h", *argv]
    ssh = ExecTransport(["ssh", "-T", "host", "${COMMAND}"]).argv(argv)
    assert ssh == ["ssh", "-T", "host", "/bin/sh -c 'echo '\"'\"'a b'\"'\"'' 'x y'"]


def test_exec_command_runs_locally_as_a_transport(tmp_path):
    code, out, err = ExecTransport(["env", "-i"]).run(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (code, out, err) == (3, b"out\n", b"err\n")
