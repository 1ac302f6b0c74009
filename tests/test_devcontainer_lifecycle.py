from __future__ import annotations

from typing import Any

import pytest

from devsy.devcontainer.lifecycle_commands import LifecycleCommand, parse_lifecycle_command
from devsy.errors import ConfigError


def test_string_runs_through_a_shell() -> None:
    command = parse_lifecycle_command("postCreateCommand", "make setup && echo 'done' > /tmp/m")
    assert command == LifecycleCommand(
        "postCreateCommand", (("postCreateCommand", ["/bin/sh", "-c", "make setup && echo 'done' > /tmp/m"]),)
    )


def test_array_is_an_argv_without_a_shell() -> None:
    command = parse_lifecycle_command("onCreateCommand", ["echo", "a b", "$HOME"])
    assert command is not None
    assert command.argvs() == [("onCreateCommand", ["echo", "a b", "$HOME"])]


def test_object_runs_each_named_command_in_key_order() -> None:
    raw = {"zeta": "echo z", "alpha": ["touch", "/tmp/a"], "skip": None, "empty": ""}
    command = parse_lifecycle_command("postStartCommand", raw)
    assert command is not None
    assert command.argvs() == [
        ("postStartCommand:zeta", ["/bin/sh", "-c", "echo z"]),
        ("postStartCommand:alpha", ["touch", "/tmp/a"]),
    ]


@pytest.mark.parametrize("raw", [None, "", "   ", [], {}, {"a": None, "b": []}])
def test_nothing_to_run_is_none(raw: Any) -> None:
    assert parse_lifecycle_command("postCreateCommand", raw) is None


def test_argvs_returns_copies() -> None:
    command = parse_lifecycle_command("onCreateCommand", ["echo", "x"])
    assert command is not None
    command.argvs()[0][1].append("mutated")
    assert command.argvs() == [("onCreateCommand", ["echo", "x"])]


@pytest.mark.parametrize(
    ("raw", "key", "message"),
    [
        (42, "postCreateCommand", "must be a string, an array of strings or an object, got number"),
        (True, "postCreateCommand", "got boolean"),
        (["echo", 1], "postCreateCommand", "must be an array of strings"),
        ({"server": 5}, "postCreateCommand.server", "must be a string or an array of strings, got number"),
        ({"server": {"nested": "x"}}, "postCreateCommand.server", "got object"),
        ({"server": ["run", None]}, "postCreateCommand.server", "must be an array of strings"),
    ],
)
def test_invalid_forms_name_file_and_key(raw: Any, key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as excinfo:
        parse_lifecycle_command("postCreateCommand", raw, where="/ws/.devcontainer.json")
    assert excinfo.value.message.startswith(f'/ws/.devcontainer.json: "{key}"')
    assert excinfo.value.hint
