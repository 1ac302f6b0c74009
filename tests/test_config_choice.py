"""Choosing the devcontainer.json: `devsy up PATH --config FILE`, the .devcontainer/<name>/devcontainer.json
convention, a clear error when a folder has several configs and none was chosen, and the choice remembered by the
commands that read the config again (start's postStartCommand, a later up)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devsy.devcontainer.config import load_config
from devsy.errors import ConfigError
from helpers.cli import HOST_NET
from helpers.engine import containers_of


def _named(root: Path, name: str, config: dict) -> Path:
    folder = root / ".devcontainer" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "devcontainer.json").write_text(json.dumps(config))
    return folder / "devcontainer.json"


def _config(guest_image: str, name: str) -> dict:
    return {"image": guest_image, "containerEnv": {"PICKED": name},
            "postStartCommand": f"echo {name} >> /tmp/starts"}


def test_config_picks_the_named_file_and_later_commands_keep_it(devsy, ws_id, guest_image, tmp_path):
    project = tmp_path / "p"
    _named(project, "alpha", _config(guest_image, "alpha"))
    _named(project, "beta", _config(guest_image, "beta"))
    devsy.up(project, "--id", ws_id, "--config", ".devcontainer/beta/devcontainer.json", *HOST_NET)
    devsy.wait_hooks(ws_id)  # postStartCommand comes after waitFor
    assert devsy.run("exec", ws_id, "--", "printenv", "PICKED").stdout == b"beta\n"
    assert devsy.run("stop", ws_id).returncode == 0
    started = devsy.run("start", ws_id)  # reads the config again for postStartCommand: the chosen one
    assert started.returncode == 0, started.text
    again = devsy.up(project, "--id", ws_id, *HOST_NET)  # no --config: the workspace's own choice, not an error
    assert again.json["outcome"] == "success"
    devsy.wait_hooks(ws_id)
    assert devsy.run("exec", ws_id, "--", "cat", "/tmp/starts").stdout == b"beta\nbeta\n"
    # The remembered file gone: a clear error naming it, not a silent switch to another config.
    (project / ".devcontainer" / "beta" / "devcontainer.json").unlink()
    assert devsy.run("stop", ws_id).returncode == 0
    gone = devsy.run("start", ws_id, "--json")
    assert gone.returncode != 0
    error = gone.json["error"]
    assert error["type"] == "config" and "beta/devcontainer.json is not a file" in error["message"]
    assert "--config" in error["hint"] and "Traceback" not in gone.text


def test_several_configs_without_a_choice_are_listed_and_nothing_is_left(devsy, ws_id, guest_image, tmp_path,
                                                                        docker_client):
    project = tmp_path / "p"
    _named(project, "alpha", _config(guest_image, "alpha"))
    _named(project, "beta", _config(guest_image, "beta"))
    (project / ".devcontainer.json").write_text(json.dumps(_config(guest_image, "root")))
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] == "config"
    for listed in (".devcontainer.json", ".devcontainer/alpha/devcontainer.json",
                   ".devcontainer/beta/devcontainer.json"):
        assert listed in error["message"]
    assert "--config" in error["hint"]
    assert "Traceback" not in result.text
    assert containers_of(docker_client, ws_id) == []
    assert devsy.run("list", "--json").json["workspaces"] == []


def test_a_missing_config_file_is_a_clear_error(devsy, ws_id, guest_image, tmp_path, docker_client):
    project = tmp_path / "p"
    _named(project, "alpha", _config(guest_image, "alpha"))
    result = devsy.up(project, "--id", ws_id, "--config", "nope/devcontainer.json", *HOST_NET, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] == "config" and "nope/devcontainer.json" in error["message"] and "is not a file" in \
        error["message"]
    assert containers_of(docker_client, ws_id) == []
    assert devsy.run("list", "--json").json["workspaces"] == []


def test_one_named_config_needs_config_as_in_the_reference_cli(tmp_path: Path) -> None:
    # devcontainers/cli looks only at .devcontainer/devcontainer.json and .devcontainer.json without --config.
    named = _named(tmp_path, "only", {"image": "x"})
    with pytest.raises(ConfigError, match=r"\.devcontainer/only/devcontainer\.json") as caught:
        load_config(tmp_path, env={})
    assert "--config" in (caught.value.hint or "")
    assert load_config(tmp_path, config_path=named, env={}).image == "x"


def test_an_absolute_config_path_outside_the_folder_is_used(devsy, ws_id, guest_image, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    elsewhere = _named(tmp_path / "configs", "shared", _config(guest_image, "shared"))
    devsy.up(project, "--id", ws_id, "--config", str(elsewhere), *HOST_NET)
    assert devsy.run("exec", ws_id, "--", "printenv", "PICKED").stdout == b"shared\n"
