"""The spec's variable table (containers.dev, "Variables in devcontainer.json"), case by case, and one end-to-end
check that ${containerEnv:...} reaches the container resolved (issue 16, item 1).

Where the spec says nothing, the reference CLI's src/spec-common/variableSubstitution.ts decides: unknown variables
stay as written; ${localEnv}/${containerEnv} without a name is an error."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from devsy.devcontainer.variables import (
    SubstitutionContext,
    container_substitute,
    devcontainer_id_for_labels,
    substitute,
    uses_container_env,
)
from devsy.errors import ConfigError
from helpers.cli import HOST_NET, DevsyCli
from helpers.projects import make_project

HOST = SubstitutionContext(local_workspace_folder="/home/me/src/proj", env={"HOME": "/home/me", "EMPTY": ""},
                           devcontainer_id="ID52", container_workspace_folder="/workspaces/proj")
IN_CONTAINER = SubstitutionContext(local_workspace_folder="/home/me/src/proj", env={},
                                   container_env={"PATH": "/usr/bin:/bin", "EMPTY": ""})

# (text, context, expected): the spec's rows, then the reference's answers where the spec is silent.
TABLE = [
    ("${localEnv:HOME}", HOST, "/home/me"),
    ("${env:HOME}", HOST, "/home/me"),  # the older spelling the reference still accepts
    ("${localEnv:MISSING}", HOST, ""),
    ("${localEnv:MISSING:fallback}", HOST, "fallback"),
    ("${localEnv:EMPTY:fallback}", HOST, ""),  # a default is for unset, not for empty
    ("${containerEnv:PATH}", IN_CONTAINER, "/usr/bin:/bin"),
    ("${containerEnv:PATH}:/extra", IN_CONTAINER, "/usr/bin:/bin:/extra"),
    ("${containerEnv:MISSING}", IN_CONTAINER, ""),
    ("${containerEnv:MISSING:fallback}", IN_CONTAINER, "fallback"),
    ("${containerEnv:EMPTY:fallback}", IN_CONTAINER, ""),
    ("${containerEnv:PATH}", HOST, "${containerEnv:PATH}"),  # before the container exists: left for later
    ("${localWorkspaceFolder}", HOST, "/home/me/src/proj"),
    ("${localWorkspaceFolderBasename}", HOST, "proj"),
    ("${containerWorkspaceFolder}", HOST, "/workspaces/proj"),
    ("${containerWorkspaceFolderBasename}", HOST, "proj"),
    ("${devcontainerId}", HOST, "ID52"),
    ("${nope}", HOST, "${nope}"),  # unknown: as written
    ("${nope:arg}", HOST, "${nope:arg}"),
    ("${localWorkspaceFolder:arg}", HOST, "${localWorkspaceFolder:arg}"),
    ("$HOME and ${", HOST, "$HOME and ${"),
]


@pytest.mark.parametrize(("text", "ctx", "expected"), TABLE, ids=[row[0] for row in TABLE])
def test_spec_variable_table(text: str, ctx: SubstitutionContext, expected: str) -> None:
    assert substitute(text, ctx) == expected


@pytest.mark.parametrize("text", ["${localEnv}", "${env}", "${containerEnv}", "${localEnv::x}"])
def test_env_variable_without_a_name_is_an_error(text: str) -> None:
    with pytest.raises(ConfigError, match="no environment variable name is given"):
        substitute(text, HOST)


def test_container_substitute_resolves_container_env_only() -> None:
    value = {"PATH": "${containerEnv:PATH}:/x", "keep": ["${localEnv:HOME}", "${devcontainerId}"], "n": 3}
    assert uses_container_env(value) and not uses_container_env({"a": "${localEnv:HOME}"})
    assert container_substitute(value, {"PATH": "/bin"}) == {
        "PATH": "/bin:/x", "keep": ["${localEnv:HOME}", "${devcontainerId}"], "n": 3}


def test_devcontainer_id_is_the_reference_hash_of_the_sorted_labels() -> None:
    labels = {"b": "2", "a": "1"}
    digest = hashlib.sha256(json.dumps({"a": "1", "b": "2"}, separators=(",", ":")).encode()).hexdigest()
    found = devcontainer_id_for_labels(labels)
    assert len(found) == 52 and set(found) <= set("0123456789abcdefghijklmnopqrstuv")
    assert int(found, 32) == int(digest, 16)  # the same number, written in base 32 as BigInt.toString(32) does
    assert devcontainer_id_for_labels({"a": "1", "b": "2"}) == found != devcontainer_id_for_labels({"a": "1"})


def test_container_env_and_devcontainer_id_resolved_in_the_container(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                     tmp_path: Path, docker_client) -> None:
    config = {
        "image": guest_image,
        "containerEnv": {"FROM_CE": "ce-value", "DCID": "${devcontainerId}"},
        "remoteEnv": {"R": "${containerEnv:FROM_CE}-and-${containerEnv:NOT_SET:dflt}"},
        # Single quotes: the shell would leave ${containerEnv:...} alone, so only devsy can have resolved it.
        "postCreateCommand": "echo '${containerEnv:FROM_CE}' \"$R\" > /tmp/resolved",
    }
    project = make_project(tmp_path / "project", config)
    devsy.up(project, "--id", ws_id, *HOST_NET)
    devsy.wait_hooks(ws_id)  # postCreateCommand comes after waitFor
    assert devsy.run("exec", ws_id, "--", "cat", "/tmp/resolved").stdout == b"ce-value ce-value-and-dflt\n"
    first_id = devsy.run("exec", ws_id, "--", "sh", "-c", "echo $DCID").stdout.strip()
    assert len(first_id) == 52, first_id
    devsy.up(project, "--id", ws_id, "--recreate", *HOST_NET)
    assert devsy.run("exec", ws_id, "--", "sh", "-c", "echo $DCID").stdout.strip() == first_id  # across rebuilds
