from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from devsy.devcontainer.config import (
    BuildConfig,
    DevContainerConfig,
    find_config,
    image_only_config,
    load_config,
)
from devsy.driver.base import GpuRequirement, HostRequirements, Mount, MountType
from devsy.errors import ConfigError


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "my-project"
    folder.mkdir()
    return folder


def write_config(workspace: Path, content: dict[str, Any] | str, *, nested: bool = True) -> Path:
    path = workspace / ".devcontainer" / "devcontainer.json" if nested else workspace / ".devcontainer.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def load(workspace: Path, content: dict[str, Any] | str, env: dict[str, str] | None = None) -> DevContainerConfig:
    write_config(workspace, content)
    return load_config(workspace, env=env or {}, devcontainer_id="dcid")


# --- locating the file ---------------------------------------------------------------------------------------------


def test_find_config_finds_either_well_known_place_and_refuses_to_guess_between_them(workspace: Path) -> None:
    assert find_config(workspace) is None
    root = write_config(workspace, {"image": "root"}, nested=False)
    assert find_config(workspace) == root
    nested = write_config(workspace, {"image": "nested"})
    # Both: devsy lists them rather than take the first silently (tests/test_config_choice.py).
    with pytest.raises(ConfigError, match="2 devcontainer configurations"):
        find_config(workspace)
    root.unlink()
    assert find_config(workspace) == nested
    assert load_config(workspace, env={}).image == "nested"


def test_root_config_file_is_used_when_alone(workspace: Path) -> None:
    path = write_config(workspace, {"image": "root"}, nested=False)
    config = load_config(workspace, env={})
    assert (config.path, config.image) == (path, "root")


def test_explicit_config_path_wins(workspace: Path, tmp_path: Path) -> None:
    write_config(workspace, {"image": "found"})
    other = tmp_path / "elsewhere.json"
    other.write_text('{"image": "explicit"}')
    assert load_config(workspace, config_path=other, env={}).image == "explicit"


def test_missing_config_is_a_config_error(workspace: Path) -> None:
    with pytest.raises(ConfigError, match="no devcontainer.json in") as excinfo:
        load_config(workspace, env={})
    assert ".devcontainer/devcontainer.json" in excinfo.value.hint


def test_syntax_errors_surface_with_position(workspace: Path) -> None:
    path = write_config(workspace, '{\n  // comment\n  "image": "x",,\n}')
    with pytest.raises(ConfigError, match="line 3") as excinfo:
        load_config(workspace, env={})
    assert str(path) in excinfo.value.message


# --- defaults --------------------------------------------------------------------------------------------------


def test_image_config_defaults(workspace: Path) -> None:
    config = load(workspace, "// minimal\n{\"image\": \"ubuntu:24.04\",}")
    assert config.image == "ubuntu:24.04"
    assert config.build is None
    assert config.workspace_folder == "/workspaces/my-project"
    assert config.workspace_mount is None
    assert config.override_command is True
    assert config.host_requirements == HostRequirements()
    assert (config.mounts, config.container_env, config.remote_env) == ([], {}, {})
    assert (config.remote_user, config.container_user, config.name) == (None, None, None)
    assert (config.on_create_command, config.post_create_command, config.post_start_command) == (None, None, None)


def test_image_only_config_matches_spec_defaults() -> None:
    config = image_only_config("alpine:3.20", "proj")
    assert config.path is None
    assert config.image == "alpine:3.20"
    assert config.workspace_folder == "/workspaces/proj"
    assert config.override_command is True
    assert config.build is None and config.workspace_mount is None


def test_typed_fields_are_read(workspace: Path) -> None:
    config = load(
        workspace,
        {
            "name": "dev",
            "image": "x",
            "remoteUser": "vscode",
            "containerUser": "root",
            "containerEnv": {"A": "1"},
            "remoteEnv": {"B": "2"},
            "overrideCommand": False,
            "postCreateCommand": "make",
            "onCreateCommand": ["touch", "/tmp/m"],
            "postStartCommand": {"a": "echo a"},
            "forwardPorts": [3000],
            "customizations": {"vscode": {}},
            "features": {},
        },
    )
    assert (config.name, config.remote_user, config.container_user) == ("dev", "vscode", "root")
    assert (config.container_env, config.remote_env, config.override_command) == ({"A": "1"}, {"B": "2"}, False)
    assert config.post_create_command is not None
    assert config.post_create_command.argvs() == [("postCreateCommand", ["/bin/sh", "-c", "make"])]
    assert config.on_create_command is not None
    assert config.on_create_command.argvs() == [("onCreateCommand", ["touch", "/tmp/m"])]
    assert config.post_start_command is not None
    assert config.post_start_command.argvs() == [("postStartCommand:a", ["/bin/sh", "-c", "echo a"])]


# --- build -----------------------------------------------------------------------------------------------------


def test_build_paths_resolve_against_the_config_folder(workspace: Path) -> None:
    (workspace / ".devcontainer").mkdir()
    (workspace / ".devcontainer" / "Dockerfile").write_text("FROM alpine\n")
    config = load(workspace, {"build": {"dockerfile": "Dockerfile", "args": {"V": "${localEnv:V:3}"}, "target": "dev"}})
    devcontainer_dir = (workspace / ".devcontainer").resolve()
    assert config.build == BuildConfig(
        dockerfile=devcontainer_dir / "Dockerfile", context=devcontainer_dir, args={"V": "3"}, target="dev"
    )
    assert config.image is None


def test_build_context_relative_to_config_folder(workspace: Path) -> None:
    (workspace / "docker").mkdir()
    (workspace / "docker" / "Dockerfile").write_text("FROM alpine\n")
    config = load(workspace, {"build": {"dockerfile": "../docker/Dockerfile", "context": ".."}})
    assert config.build is not None
    assert config.build.dockerfile == (workspace / "docker" / "Dockerfile").resolve()
    assert config.build.context == workspace.resolve()


def test_build_context_defaults_to_the_dockerfile_folder(workspace: Path) -> None:
    (workspace / "docker").mkdir()
    (workspace / "docker" / "Dockerfile").write_text("FROM alpine\n")
    config = load(workspace, {"build": {"dockerfile": "../docker/Dockerfile"}})
    assert config.build is not None
    assert config.build.context == (workspace / "docker").resolve()


def test_legacy_top_level_dockerfile_and_context(workspace: Path) -> None:
    (workspace / "Dockerfile.dev").write_text("FROM alpine\n")
    config = load(workspace, {"dockerFile": "../Dockerfile.dev", "context": "..", "build": {"args": {"A": "b"}}})
    assert config.build == BuildConfig(
        dockerfile=(workspace / "Dockerfile.dev").resolve(), context=workspace.resolve(), args={"A": "b"}
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({}, 'neither "image" nor "build" is set'),
        ({"name": "x"}, 'neither "image" nor "build" is set'),
        ({"image": "x", "build": {"dockerfile": "Dockerfile"}}, 'both "image" and "build" are set'),
        ({"build": {"context": ".."}}, '"build.dockerfile" is missing'),
        ({"build": {"dockerfile": "Nope"}}, '"build.dockerfile" points at .*Nope, which is not a file'),
        ({"dockerFile": "Nope"}, '"dockerFile" points at .*Nope, which is not a file'),
        ({"build": {"dockerfile": "Dockerfile", "context": "missing"}}, '"build.context" points at'),
        ({"build": "Dockerfile"}, '"build" must be an object, got string'),
        ({"build": {"dockerfile": "Dockerfile", "args": {"N": 3}}}, '"build.args.N" must be a string, got number'),
        ({"image": 7}, '"image" must be a string, got number'),
        ({"image": "x", "remoteUser": ["a"]}, '"remoteUser" must be a string, got array'),
        ({"image": "x", "containerEnv": ["A=1"]}, '"containerEnv" must be an object, got array'),
        ({"image": "x", "remoteEnv": {"N": 1}}, '"remoteEnv.N" must be a string or null, got number'),
        ({"image": "x", "overrideCommand": "no"}, '"overrideCommand" must be true or false, got string'),
        ({"image": "x", "mounts": "type=bind"}, '"mounts" must be an array, got string'),
        ({"image": "x", "mounts": ["type=nfs,target=/n"]}, r"mounts\[0\] \(target /n\): unknown mount type"),
        ({"image": "x", "workspaceFolder": "relative"}, '"workspaceFolder" must be an absolute path'),
        ({"image": "x", "postCreateCommand": 1}, '"postCreateCommand" must be'),
    ],
)
def test_validation_errors_name_file_and_key(workspace: Path, content: dict[str, Any], message: str) -> None:
    (workspace / ".devcontainer").mkdir()
    (workspace / ".devcontainer" / "Dockerfile").write_text("FROM alpine\n")
    path = write_config(workspace, content)
    with pytest.raises(ConfigError, match=message) as excinfo:
        load_config(workspace, env={})
    assert excinfo.value.message.startswith(str(path.resolve()))
    assert excinfo.value.hint


def test_env_values_are_not_echoed_in_type_errors(workspace: Path) -> None:
    write_config(workspace, {"image": "x", "containerEnv": {"TOKEN": ["hunter2-secret"]}})
    with pytest.raises(ConfigError) as excinfo:
        load_config(workspace, env={})
    assert "hunter2" not in str(excinfo.value)
    assert "containerEnv.TOKEN" in excinfo.value.message


@pytest.mark.parametrize(
    ("key", "value"),
    [("dockerComposeFile", "compose.yml")],  # "features" is supported (tests/test_features_*.py)
)
def test_unsupported_keys_are_refused(workspace: Path, key: str, value: Any) -> None:
    write_config(workspace, {"image": "x", key: value})
    with pytest.raises(ConfigError, match=f'"{key}" is not supported yet') as excinfo:
        load_config(workspace, env={})
    assert excinfo.value.hint


# --- hostRequirements ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requirements", "expected"),
    [
        ({"cpus": 4, "memory": "4gb", "storage": "32gb"}, HostRequirements(4, 4 * 2**30, 32 * 2**30)),
        ({"memory": "512mb"}, HostRequirements(None, 512 * 2**20, None)),
        ({"memory": "8GB", "storage": "1tb"}, HostRequirements(None, 8 * 2**30, 2**40)),
        ({"memory": "64kb", "storage": "1000"}, HostRequirements(None, 64 * 1024, 1000)),
        ({"gpu": "optional"}, HostRequirements(gpu=GpuRequirement.OPTIONAL)),
    ],
)
def test_host_requirements(workspace: Path, requirements: dict[str, Any], expected: HostRequirements) -> None:
    assert load(workspace, {"image": "x", "hostRequirements": requirements}).host_requirements == expected


@pytest.mark.parametrize(
    ("requirements", "field"),
    [
        ({"memory": "4 gigs"}, "hostRequirements.memory"),
        ({"memory": "1.5gb"}, "hostRequirements.memory"),
        ({"memory": 4096}, "hostRequirements.memory"),
        ({"storage": "-1gb"}, "hostRequirements.storage"),
        ({"cpus": "2"}, "hostRequirements.cpus"),
        ({"cpus": 0}, "hostRequirements.cpus"),
        ({"cpus": 1.5}, "hostRequirements.cpus"),
        ({"cpus": True}, "hostRequirements.cpus"),
    ],
)
def test_invalid_host_requirements_name_the_field(workspace: Path, requirements: dict[str, Any], field: str) -> None:
    write_config(workspace, {"image": "x", "hostRequirements": requirements})
    with pytest.raises(ConfigError, match=f'"{field}"') as excinfo:
        load_config(workspace, env={})
    assert excinfo.value.hint


# --- variables, workspaceFolder and workspaceMount -------------------------------------------------------------


def test_workspace_folder_and_mount_with_variables(workspace: Path) -> None:
    config = load(
        workspace,
        {
            "image": "x",
            "workspaceFolder": "/src/${localWorkspaceFolderBasename}",
            "workspaceMount": (
                "type=bind,source=${localWorkspaceFolder},target=${containerWorkspaceFolder},consistency=cached"
            ),
            "containerEnv": {"WS": "${containerWorkspaceFolderBasename}", "ID": "${devcontainerId}"},
        },
    )
    assert config.workspace_folder == "/src/my-project"
    assert config.workspace_mount == Mount(MountType.BIND, "/src/my-project", str(workspace.resolve()))
    assert config.container_env == {"WS": "my-project", "ID": "dcid"}


def test_default_workspace_folder_feeds_container_variables(workspace: Path) -> None:
    config = load(workspace, {"image": "x", "remoteEnv": {"W": "${containerWorkspaceFolder}/bin"}})
    assert config.remote_env == {"W": "/workspaces/my-project/bin"}


def test_local_env_with_default_in_config(workspace: Path) -> None:
    config = load(
        workspace,
        {
            "image": "${localEnv:IMAGE:ubuntu:24.04}",
            "remoteUser": "${localEnv:DEV_USER:vscode}",
            "containerEnv": {"HOME_ON_HOST": "${localEnv:HOME}", "UNSET": "${localEnv:NOT_SET}"},
            "remoteEnv": {"PATH": "${containerEnv:PATH}:/extra"},
        },
        env={"HOME": "/home/me", "DEV_USER": "alice"},
    )
    assert config.image == "ubuntu:24.04"
    assert config.remote_user == "alice"
    assert config.container_env == {"HOME_ON_HOST": "/home/me", "UNSET": ""}
    # In-container variables are resolved later, inside the container.
    assert config.remote_env == {"PATH": "${containerEnv:PATH}:/extra"}


def test_mounts_with_variables_and_both_forms(workspace: Path) -> None:
    config = load(
        workspace,
        {
            "image": "x",
            "mounts": [
                "source=${localEnv:HOME}/.cache,target=/cache,type=bind,readonly",
                {"type": "volume", "source": "vol-${devcontainerId}", "target": "/data"},
                "type=tmpfs,target=/scratch",
            ],
        },
        env={"HOME": "/home/me"},
    )
    assert config.mounts == [
        Mount(MountType.BIND, "/cache", "/home/me/.cache", True),
        Mount(MountType.VOLUME, "/data", "vol-dcid"),
        Mount(MountType.TMPFS, "/scratch"),
    ]


def test_bind_source_that_stays_relative_after_substitution_is_refused_without_leaking(workspace: Path) -> None:
    write_config(workspace, {"image": "x", "mounts": ["type=bind,source=${localEnv:SECRET_DIR},target=/s"]})
    with pytest.raises(ConfigError, match=r"mounts\[0\] \(target /s\): the bind source must be") as excinfo:
        load_config(workspace, env={"SECRET_DIR": "relative-secret-dir"})
    assert "relative-secret-dir" not in str(excinfo.value)


def test_default_devcontainer_id_is_stable_and_folder_specific(tmp_path: Path) -> None:
    ids = []
    for name in ("a", "a", "b"):
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        write_config(folder, {"image": "x", "containerEnv": {"ID": "${devcontainerId}"}})
        ids.append(load_config(folder, env={}).container_env["ID"])
    assert ids[0] == ids[1] != ids[2]
    assert len(ids[0]) == 52 and ids[0].isalnum()


def test_process_environment_is_the_default_env(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVSY_TEST_IMAGE", "from-env:1")
    write_config(workspace, {"image": "${localEnv:DEVSY_TEST_IMAGE}"})
    assert load_config(workspace).image == "from-env:1"
