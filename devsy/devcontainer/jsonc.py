"""devcontainer.json is JSON with comments and trailing commas (JSONC): parsed with json5, errors reported by place."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import json5

from devsy.errors import ConfigError

# json5 reports syntax errors as '<string>:LINE Unexpected "X" at column COL' (or 'Unexpected end of input').
# The message is the only place the position is exposed across json5 versions, so it is parsed, not trusted blindly.
_POSITION = re.compile(r":(?P<line>\d+)\s+(?P<what>.*?)\s+at column (?P<col>\d+)\s*$", re.DOTALL)
_UNEXPECTED_CHAR = re.compile(r'^Unexpected "(?P<char>.)"$', re.DOTALL)
# A real devcontainer.json is a few KB; 1 MiB is hundreds of times that. The bound keeps a stray huge file from
# costing minutes and hundreds of MB (json5, used for error positions, takes ~7 s per MB in pure Python).
MAX_CONFIG_BYTES = 1 << 20
_JSON5_MAX_CHARS = 64 << 10  # json5 (~7 s per MiB) only words the errors of texts this small; bigger ones get stdlib's
# JSONC = JSON + comments + trailing commas, read in two C-speed passes that keep strings verbatim: the first blanks
# comments (in place, so positions still match the file), the second drops a comma that only whitespace separates
# from `]` or `}` and that follows a value; the stdlib JSON parser then reads the result. Every repetition is
# possessive (Python 3.11+), so both passes stay linear whatever the input.
_STRING = r'"(?:[^"\\\n]|\\.)*+"'
# Never past its first `*/`; an unterminated one runs to the end in one match (kept as is, so parsing fails) rather
# than being rescanned from every later `/*`.
_BLOCK_COMMENT = r"/\*(?:[^*]|\*(?!/))*+(?:\*/|\Z)"
_COMMENTS = re.compile(rf"(?P<string>{_STRING})|(?P<comment>//[^\n]*+|{_BLOCK_COMMENT})")
_TRAILING_COMMAS = re.compile(rf"(?P<string>{_STRING})|(?P<comma>,)(?=\s*+[\]}}])")
_JSON_SPACE = " \t\r\n"


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
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)  # never more: the file may be huge (or still growing)
            if len(data) > MAX_CONFIG_BYTES:
                raise _too_large(path, max(len(data), _size_of(handle.fileno())))
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
        value = _fast_parse(text)
    except (ValueError, RecursionError) as exc:  # json.JSONDecodeError is a ValueError
        if len(text) > _JSON5_MAX_CHARS:
            # json5 would take seconds here only to word the error: the stdlib's position is exact (comments were
            # blanked in place), so report that.
            raise _plain_error(exc, source) from None
        value = _json5(text, source)
    if not isinstance(value, dict):
        raise ConfigError(
            f"{source}: the top level must be a JSON object, got {json_type_name(value)}",
            hint='Wrap the settings in { ... }, for example {"image": "ubuntu:24.04"}.',
        )
    return value


def _json5(text: str, source: str) -> Any:
    # json5 is slow but words syntax errors well, and reads the JSON5 extras (single quotes, bare keys) some use.
    try:
        return json5.loads(text)
    except ValueError as exc:
        raise _syntax_error(str(exc), source) from None
    except RecursionError:
        raise _too_deep(source) from None


def _too_deep(source: str) -> ConfigError:
    return ConfigError(f"{source} is nested too deeply to parse", hint="Flatten the deeply nested values.")


def _plain_error(exc: ValueError | RecursionError, source: str) -> ConfigError:
    if isinstance(exc, RecursionError):
        return _too_deep(source)
    if not isinstance(exc, json.JSONDecodeError):  # e.g. an integer literal of more digits than Python converts
        return ConfigError(f"{source}: invalid JSON: {exc}", hint=f"Fix the JSON in {source}.")
    line, col = exc.lineno, exc.colno
    return ConfigError(
        f"{source}: invalid JSON at line {line}, column {col}: {exc.msg[:1].lower()}{exc.msg[1:]}",
        hint=f"Fix the syntax at line {line}, column {col} of {source} (comments and trailing commas are allowed).",
    )


def _fast_parse(text: str) -> Any:
    """Parse JSONC with the stdlib parser (linear, in C); ValueError if it is not plain JSONC."""
    return json.loads(_TRAILING_COMMAS.sub(_drop_trailing_comma, _COMMENTS.sub(_blank_comment, text)))


def _blank_comment(match: re.Match[str]) -> str:
    text = match.group()
    if match.lastgroup == "string" or (text.startswith("/*") and (len(text) < 4 or not text.endswith("*/"))):
        return text  # a string, or an unterminated comment: left for the parser to reject
    # Newlines kept, so line numbers in anything reported later still match the file.
    return re.sub(r"[^\n]", " ", text)


def _drop_trailing_comma(match: re.Match[str]) -> str:
    if match.lastgroup == "string":
        return match.group()
    # Only a comma after a value trails: `{,}`, `[,]` or `[1,,]` stay invalid, as in VS Code's JSONC. The scan back
    # covers only the blanks since the previous token, so the pass stays linear.
    text, i = match.string, match.start() - 1
    while i >= 0 and text[i] in _JSON_SPACE:
        i -= 1
    return "," if i < 0 or text[i] in "[{," else " "


def _size_of(fd: int) -> int:
    try:
        return os.fstat(fd).st_size
    except OSError:
        return 0


def _too_large(path: Path, size: int) -> ConfigError:
    return ConfigError(
        f"{path} is {size} bytes ({size / (1 << 20):.1f} MiB); devsy reads at most {MAX_CONFIG_BYTES} bytes "
        f"({MAX_CONFIG_BYTES >> 20} MiB) of devcontainer.json, and a real one is a few KB",
        hint=f"check that {path} is the file you meant, and remove the generated or pasted bulk from it",
    )


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
