from __future__ import annotations

from pathlib import Path

import pytest

from devsy.devcontainer.jsonc import load_jsonc, parse_jsonc
from devsy.errors import ConfigError


def write(tmp_path: Path, text: str | bytes, name: str = "devcontainer.json") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_comments_and_trailing_commas_are_accepted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """// leading comment
        {
          /* block
             comment */
          "image": "ubuntu:24.04", // trailing comment
          "url": "http://example.com/a//b",
          "forwardPorts": [3000, 8080,],
          "containerEnv": {"A": "1",},
        }
        """,
    )
    assert load_jsonc(path) == {
        "image": "ubuntu:24.04",
        "url": "http://example.com/a//b",
        "forwardPorts": [3000, 8080],
        "containerEnv": {"A": "1"},
    }


def test_utf8_bom_is_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, '\ufeff{"name": "é"}'.encode())
    assert load_jsonc(path) == {"name": "é"}


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        # A missing comma between members: the error is at the second key.
        ('{\n  "image": "x"\n  "name": "y"\n}\n', 3, 3),
        # A line break inside a string.
        ('{\n  "name": "abc\n"}', 2, 15),
        # A stray token after a value.
        ('{"image": "x" oops}', 1, 15),
        # An unterminated block comment runs to the end of the file.
        ('{\n  "image": "x"\n  /* never closed\n', 4, 1),
    ],
)
def test_syntax_error_reports_file_line_and_column(tmp_path: Path, text: str, line: int, column: int) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as excinfo:
        load_jsonc(path)
    error = excinfo.value
    assert str(path) in error.message
    assert f"line {line}, column {column}" in error.message
    assert f"line {line}, column {column}" in error.hint


def test_syntax_error_column_counts_characters_after_a_bom_and_tabs(tmp_path: Path) -> None:
    path = write(tmp_path, '\ufeff{\n\t"a": 1\n\t"b": 2\n}'.encode())
    with pytest.raises(ConfigError, match=r"line 3, column 2: unexpected character '\"'"):
        load_jsonc(path)


def test_syntax_error_message_stays_on_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "name": "abc\n"}')
    with pytest.raises(ConfigError) as excinfo:
        load_jsonc(path)
    assert "\n" not in excinfo.value.message


@pytest.mark.parametrize(("text", "kind"), [("[1, 2]", "array"), ('"image"', "string"), ("null", "null")])
def test_top_level_must_be_an_object(tmp_path: Path, text: str, kind: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=f"top level must be a JSON object, got {kind}"):
        load_jsonc(path)


@pytest.mark.parametrize("text", ["", "  \n\t\n"])
def test_empty_file_is_a_config_error(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match="is empty"):
        load_jsonc(path)


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, b'{\n  "name": "\xff\xfe"\n}')
    with pytest.raises(ConfigError) as excinfo:
        load_jsonc(path)
    assert str(path) in excinfo.value.message
    assert "not valid UTF-8" in excinfo.value.message
    assert "line 2" in excinfo.value.message
    assert "UTF-8" in excinfo.value.hint


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_jsonc(tmp_path / "nope.json")


def test_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_jsonc(tmp_path)


def test_unreadable_path_is_a_config_error(tmp_path: Path) -> None:
    # A path "inside" a regular file fails with ENOTDIR, an OS error that is neither "missing" nor "a directory"
    # (and, unlike a chmod 000 file, it fails for root too).
    parent = write(tmp_path, "{}", name="not-a-folder")
    with pytest.raises(ConfigError, match="cannot read") as excinfo:
        load_jsonc(parent / "devcontainer.json")
    assert excinfo.value.hint


@pytest.mark.parametrize("text", ['{,}', '{"mounts": [,]}', '{"a": [1,,]}', '{"a": 1,, }', '{"a": [ /* c */ , ]}'])
def test_a_comma_with_no_value_before_it_is_an_error_not_a_trailing_comma(text: str) -> None:
    # As json5 and VS Code's JSONC parser: a deleted entry's leftover comma is a mistake to report, not to forgive.
    with pytest.raises(ConfigError, match="invalid JSON at line 1"):
        parse_jsonc(text, source="devcontainer.json")
