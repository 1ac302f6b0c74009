from __future__ import annotations

import pytest

from devsy.errors import UsageError
from devsy.workspace.ids import derive_workspace_id, validate_workspace_id
from devsy.workspace.source import Source


@pytest.mark.parametrize("good", ["a", "0", "my-project", "a-b-c-1", "x" * 63, "9lives", "trailing-"])
def test_valid_ids_are_returned_unchanged(good: str) -> None:
    assert validate_workspace_id(good) == good


@pytest.mark.parametrize(
    "bad",
    ["../x", "a/b", "..", ".", "A", "", "x" * 64, "-lead", "a\\b", "a\0b", "a b", "tab\t", "new\n", "ünï", "a_b", "a.b"],
)
def test_path_tricks_and_bad_characters_are_rejected_with_rule_and_hint(bad: str) -> None:
    with pytest.raises(UsageError) as info:
        validate_workspace_id(bad)
    assert repr(bad) in info.value.message
    assert "63" in info.value.message and "lowercase" in info.value.message
    assert "--id" in info.value.hint


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (Source("local", "/home/me/src/My_Project"), "my-project"),
        (Source("local", "/srv/api.v2"), "api-v2"),
        (Source("git", "https://github.com/org/Repo.git"), "repo"),
        (Source("git", "https://github.com/org/repo/"), "repo"),
        (Source("git", "git@github.com:org/dotfiles.git"), "dotfiles"),
        (Source("git", "ssh://git@host:2222/team/svc"), "svc"),
        (Source("git", "file:///tmp/x/bare-repo.git"), "bare-repo"),
        (Source("image", "mcr.microsoft.com/devcontainers/python:3.11"), "python-3-11"),
        (Source("image", "ubuntu"), "ubuntu"),
        (Source("image", "localhost:5000/team/base_img:Latest"), "base-img-latest"),
    ],
)
def test_derivation_examples(source: Source, expected: str) -> None:
    assert derive_workspace_id(source) == expected


def test_image_with_digest_only_keeps_digests_apart() -> None:
    first = derive_workspace_id(Source("image", "alpine@sha256:" + "a" * 64))
    second = derive_workspace_id(Source("image", "alpine@sha256:" + "b" * 64))
    assert first.startswith("alpine-") and second.startswith("alpine-") and first != second


def test_long_names_are_truncated_with_a_stable_distinct_suffix() -> None:
    one = Source("local", "/x/" + "a" * 80 + "-one")
    two = Source("local", "/x/" + "a" * 80 + "-two")
    derived = derive_workspace_id(one)
    assert len(derived) <= 63
    assert derived == derive_workspace_id(one)
    assert derived != derive_workspace_id(two)
    validate_workspace_id(derived)


def test_names_without_usable_characters_get_a_stable_hashed_id() -> None:
    source = Source("local", "/x/___")
    derived = derive_workspace_id(source)
    assert derived.startswith("workspace-")
    assert derived == derive_workspace_id(source)
    assert derived != derive_workspace_id(Source("local", "/y/___"))
    assert derive_workspace_id(Source("local", "/")).startswith("workspace-")


def test_credentials_in_git_url_do_not_change_the_id() -> None:
    plain = derive_workspace_id(Source("git", "https://host/" + "r" * 80 + ".git"))
    with_token = derive_workspace_id(Source("git", "https://tok:secret@host/" + "r" * 80 + ".git"))
    assert plain == with_token
