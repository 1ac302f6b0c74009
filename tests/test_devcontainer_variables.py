from __future__ import annotations

from devsy.devcontainer.variables import SubstitutionContext, substitute

CTX = SubstitutionContext(
    local_workspace_folder="/home/me/src/proj",
    env={"HOME": "/home/me", "EMPTY": ""},
    devcontainer_id="abc123",
    container_workspace_folder="/workspaces/app",
)


def test_workspace_variables() -> None:
    assert substitute("${localWorkspaceFolder}", CTX) == "/home/me/src/proj"
    assert substitute("${localWorkspaceFolderBasename}", CTX) == "proj"
    assert substitute("${containerWorkspaceFolder}/x", CTX) == "/workspaces/app/x"
    assert substitute("${containerWorkspaceFolderBasename}", CTX) == "app"
    assert substitute("vol-${devcontainerId}", CTX) == "vol-abc123"


def test_several_variables_in_one_string() -> None:
    assert substitute("${localEnv:HOME}:${localWorkspaceFolderBasename}", CTX) == "/home/me:proj"


def test_local_env_with_and_without_default() -> None:
    assert substitute("${localEnv:HOME}", CTX) == "/home/me"
    assert substitute("${env:HOME}", CTX) == "/home/me"
    assert substitute("${localEnv:MISSING}", CTX) == ""
    assert substitute("${localEnv:MISSING:fallback}", CTX) == "fallback"
    # A default may itself contain colons (URLs, host:port).
    assert substitute("${localEnv:MISSING:http://proxy:3128}", CTX) == "http://proxy:3128"
    # The default applies only when the variable is unset, not when it is set to "".
    assert substitute("${localEnv:EMPTY:fallback}", CTX) == ""


def test_env_values_are_not_substituted_again() -> None:
    ctx = SubstitutionContext(local_workspace_folder="/w", env={"X": "${localWorkspaceFolder}"})
    assert substitute("${localEnv:X}", ctx) == "${localWorkspaceFolder}"


def test_unknown_variables_stay_as_written() -> None:
    for text in ["${containerEnv:PATH}", "${nope}", "${localWorkspaceFolder:arg}", "$HOME", "${"]:
        assert substitute(text, CTX) == text


def test_unresolved_context_fields_leave_their_variables() -> None:
    ctx = SubstitutionContext(local_workspace_folder="/w/p", env={})
    assert substitute("${containerWorkspaceFolder}|${devcontainerId}|${localWorkspaceFolder}", ctx) == (
        "${containerWorkspaceFolder}|${devcontainerId}|/w/p"
    )
    later = ctx.with_container_workspace_folder("/workspaces/p")
    assert substitute("${containerWorkspaceFolderBasename}", later) == "p"


def test_recurses_into_lists_and_dict_values_but_not_keys() -> None:
    value = {
        "${localEnv:HOME}": "${localEnv:HOME}",
        "list": ["${localWorkspaceFolderBasename}", 3, True, None, {"deep": "${devcontainerId}"}],
    }
    assert substitute(value, CTX) == {
        "${localEnv:HOME}": "/home/me",
        "list": ["proj", 3, True, None, {"deep": "abc123"}],
    }
