from __future__ import annotations

from pathlib import Path

import pytest

from devsy.errors import UsageError
from devsy.redaction import redact_url
from devsy.workspace.source import Source, is_image_reference, parse_source


def test_git_prefix_gives_git_source(tmp_path: Path) -> None:
    assert parse_source("git:https://github.com/org/repo.git", tmp_path) == Source("git", "https://github.com/org/repo.git")
    assert parse_source("git:git@github.com:org/repo.git", tmp_path) == Source("git", "git@github.com:org/repo.git")
    assert parse_source(f"git:{tmp_path}", tmp_path) == Source("git", str(tmp_path))


@pytest.mark.parametrize("bad", ["git:", "git:  ", "git:--upload-pack=touch /tmp/x", "git:https://h/a b"])
def test_bad_git_urls_are_usage_errors(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError):
        parse_source(bad, tmp_path)


def test_bad_git_url_error_does_not_show_credentials(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        parse_source("git:https://me:hunter2@host/a b", tmp_path)
    assert "hunter2" not in str(info.value)


def test_relative_and_absolute_directories_resolve_to_absolute_local(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    assert parse_source("proj", tmp_path) == Source("local", str(project.resolve()))
    assert parse_source("proj/sub/..", tmp_path) == Source("local", str(project.resolve()))
    assert parse_source(str(project), Path("/")) == Source("local", str(project.resolve()))


def test_existing_directory_wins_over_image_grammar(tmp_path: Path) -> None:
    (tmp_path / "ubuntu").mkdir()
    assert parse_source("ubuntu", tmp_path).kind == "local"


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu",
        "ubuntu:22.04",
        "mcr.microsoft.com/devcontainers/python:3.11",
        "localhost:5000/team/img",
        "ghcr.io/org/img@sha256:" + "0" * 64,
        "img:tag@sha256:" + "f" * 64,
        "a__b/c-d.e",
    ],
)
def test_image_references(tmp_path: Path, image: str) -> None:
    assert parse_source(image, tmp_path) == Source("image", image)


@pytest.mark.parametrize(
    "text",
    ["./missing", "../missing", "/no/such/dir", "Ubuntu", "img:", "img@sha256:abc", "a//b", "-x", "img:tag:tag"],
)
def test_neither_directory_nor_image_is_a_usage_error(tmp_path: Path, text: str) -> None:
    assert not is_image_reference(text)
    with pytest.raises(UsageError) as info:
        parse_source(text, tmp_path)
    assert "does not exist" in info.value.message and "image reference" in info.value.message


def test_a_file_is_not_a_workspace_folder(tmp_path: Path) -> None:
    (tmp_path / "devcontainer.json").write_text("{}")
    with pytest.raises(UsageError, match="is a file"):
        parse_source("devcontainer.json", tmp_path)


def test_empty_source_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        parse_source("", tmp_path)


def test_redact_url_strips_userinfo_everywhere() -> None:
    text = "fatal: https://user:pa55@h/x and ssh://tok@h2/y but git@h3:z stays"
    assert redact_url(text) == "fatal: https://h/x and ssh://h2/y but git@h3:z stays"


def test_a_path_that_cannot_be_looked_at_is_a_usage_error(tmp_path: Path) -> None:
    # The system's own refusal (ENAMETOOLONG here; EACCES for a non-root user on a folder it may not search) is
    # told as what it is, never a traceback.
    with pytest.raises(UsageError, match="cannot be looked at: File name too long"):
        parse_source("x" * 300 + "/sub", tmp_path)
