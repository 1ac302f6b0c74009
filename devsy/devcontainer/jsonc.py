"""devcontainer.json is JSON with comments and trailing commas (JSONC): parsed with json5, errors reported by place."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import json5

from devsy.errors import ConfigError

# json5 reports syntax errors as '<string>:LINE Unexpected "X" at column COL' (or 'Unexpected end of input').
# The message is the only place the position is exposed across json5 versions, so it is parsed, not trusted blindly.
_POSITION = re.compile(r":(?P<line>\d+)\s+(?P<what>.*?)\s+at column (?P<col>\d+)\s*$", re.DOTALL)
_UNEXPECTED_CHAR = re.compile(r'^Unexpected "(?P<char>.)"$', re.DOTALL)


def json_type_name(value: object) -> str:
    """The JSON name of a parsed value's type, for error messages (never the value itself: it may be a secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def load_jsonc(path: Path) -> dict[str, Any]:
    """Read and parse a JSONC file whose top level must be an object; every failure is a ConfigError naming the file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist", hint="Check the path, or create the file.") from None
    except IsADirectoryError:
        raise ConfigError(
            f"{path} is a directory, not a file", hint="Point at the devcontainer.json file itself."
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}", hint="Check the file's permissions and that it is readable."
        ) from None
    try:
        # utf-8-sig drops a BOM (Windows editors add one) so line-1 columns match what the editor shows.
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path} is not valid UTF-8 (first bad byte on line {line})",
            hint=f"Re-save {path.name} with UTF-8 encoding.",
        ) from None
    return parse_jsonc(text, source=str(path))


def parse_jsonc(text: str, *, source: str) -> dict[str, Any]:
    """Parse JSONC text; `source` names the text (usually the file path) in error messages."""
    if not text.strip():
        raise ConfigError(f"{source} is empty", hint='Put a JSON object in it, for example {"image": "ubuntu:24.04"}.')
    try:
        value = json5.loads(text)
    except ValueError as exc:
        raise _syntax_error(str(exc), source) from None
    except RecursionError:
        raise ConfigError(f"{source} is nested too deeply to parse", hint="Flatten the deeply nested values.") from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{source}: the top level must be a JSON object, got {json_type_name(value)}",
            hint='Wrap the settings in { ... }, for example {"image": "ubuntu:24.04"}.',
        )
    return value


def _syntax_error(message: str, source: str) -> ConfigError:
    match = _POSITION.search(message)
    if match is None:
        # A json5 message without a position: still name the file and pass json5's words on.
        return ConfigError(f"{source}: invalid JSON: {message}", hint=f"Fix the JSON syntax in {source}.")
    line, col = int(match["line"]), int(match["col"])
    return ConfigError(
        f"{source}: invalid JSON at line {line}, column {col}: {_describe(match['what'])}",
        hint=f"Fix the syntax at line {line}, column {col} of {source} (comments and trailing commas are allowed).",
    )


def _describe(what: str) -> str:
    char = _UNEXPECTED_CHAR.match(what)
    if char is None:
        return what[:1].lower() + what[1:]
    # repr escapes a newline or tab that json5 quotes raw, so the message stays on one line.
    return f"unexpected character {char['char']!r}"
