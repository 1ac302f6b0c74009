"""The build context devsy sends to the engine: its Dockerfile checked and labelled, its files bounded and readable.

devsy writes the context archive itself instead of letting the SDK do it, for three reasons:
- Ownership: a LABEL naming the workspace goes right after every FROM, so every layer the engine commits (also the
  intermediate ones an interrupted build leaves behind) carries it, and `devsy delete` finds them by label.
- Bounds: the SDK tars whatever folder it is given; `"context": "/"` would try to send the whole disk. The root is
  refused, and any context is cut off at MAX_CONTEXT_BYTES / MAX_CONTEXT_ENTRIES with an error saying what to do.
- Errors: an unreadable file becomes an ImageError naming it (relative to the context), not an OSError traceback;
  a file that is not a Dockerfile is refused before the engine quotes its first line back.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from docker.utils.build import PatternMatcher

from devsy.devcontainer.config import BuildConfig
from devsy.errors import ConfigError, ImageError

MAX_DOCKERFILE_BYTES = 1 << 20
MAX_CONTEXT_BYTES = 4 << 30
MAX_CONTEXT_ENTRIES = 200_000
# The name of devsy's (labelled) copy of the Dockerfile inside the archive; a context file of that name is replaced.
DOCKERFILE_NAME = ".devsy.Dockerfile"
_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$")
_KEYWORD = re.compile(r"^\s*([A-Za-z]+)(\s|$)")
_LINE = re.compile(r"(dockerfile parse error(?: on)? line )(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Limits:
    max_bytes: int = MAX_CONTEXT_BYTES
    max_entries: int = MAX_CONTEXT_ENTRIES


@dataclass(frozen=True)
class LabelledDockerfile:
    text: str
    source_line: tuple[int, ...]  # the user's line number of each line of `text` (0 for an inserted LABEL)

    def in_user_lines(self, message: str) -> str:
        """An engine message with its "line N" (of this text) turned into the line of the user's Dockerfile."""
        def user_line(match: re.Match[str]) -> str:
            index = int(match.group(2)) - 1
            known = 0 <= index < len(self.source_line) and self.source_line[index]
            return f"{match.group(1)}{self.source_line[index] if known else match.group(2)}"
        return _LINE.sub(user_line, message)


def labelled_dockerfile(build: BuildConfig, labels: dict[str, str]) -> LabelledDockerfile:
    """The Dockerfile with `LABEL <labels>` after every FROM; ConfigError if the file is not a Dockerfile.

    No error quotes the file: `dockerfile` may name any file (a key, /etc/shadow), and its lines are not devsy's."""
    where = f"build.dockerfile ({build.dockerfile})"
    hint = "point build.dockerfile at a Dockerfile (relative to devcontainer.json)"
    if build.dockerfile.stat().st_size > MAX_DOCKERFILE_BYTES:
        raise ConfigError(f"{where} is larger than {MAX_DOCKERFILE_BYTES >> 20} MiB: not a Dockerfile", hint=hint)
    try:
        text = build.dockerfile.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not UTF-8 text: not a Dockerfile", hint=hint) from None
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read: {exc.strerror}", hint=hint) from None
    label = "LABEL " + " ".join(f"{key}={json.dumps(value)}" for key, value in sorted(labels.items()))
    out: list[str] = []
    source: list[int] = []
    keywords: list[str] = []
    for instruction in _instructions(text.splitlines()):
        first = len(out) - source.count(0) + 1  # the user's number of this instruction's first line
        source.extend(range(first, first + len(instruction.lines)))
        out.extend(instruction.lines)
        if instruction.keyword:
            keywords.append(instruction.keyword)
            if instruction.keyword == "FROM":
                out.append(label)
                source.append(0)
    if not keywords or keywords[0] not in ("FROM", "ARG") or "FROM" not in keywords:
        raise ConfigError(f"{where} is not a Dockerfile: it must start with FROM (or ARG, then FROM)", hint=hint)
    return LabelledDockerfile("\n".join(out) + "\n", tuple(source))


@dataclass
class _Instruction:
    keyword: str  # upper case; "" for comments, blank lines and parser directives
    lines: list[str]


def _instructions(lines: list[str]) -> Iterator[_Instruction]:
    """Dockerfile lines grouped into instructions (with their continuation lines), as the engine's parser reads them."""
    escape, directives = "\\", True
    current: _Instruction | None = None
    for line in lines:
        stripped = line.strip()
        if current is None:
            if directives:
                match = _DIRECTIVE.match(stripped)
                if match is not None:
                    if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
                        escape = match.group(2)
                    yield _Instruction("", [line])
                    continue
                directives = False  # parser directives only come before anything else
            if not stripped or stripped.startswith("#"):
                yield _Instruction("", [line])
                continue
            keyword = _KEYWORD.match(line)
            current = _Instruction(keyword.group(1).upper() if keyword else "?", [line])
        else:
            current.lines.append(line)
            if not stripped or stripped.startswith("#"):
                continue  # blank and comment lines inside a continued instruction do not end it
        if not stripped.endswith(escape):
            yield current
            current = None
    if current is not None:
        yield current


def context_archive(build: BuildConfig, dockerfile_text: str, limits: Limits = Limits()) -> IO[bytes]:
    """A tar of the build context (honouring .dockerignore) plus devsy's Dockerfile, in a temporary file."""
    root = build.context
    if root == Path(root.anchor):
        raise ConfigError(
            f"build.context is the filesystem root ({root}): devsy would send the whole disk to the engine",
            hint="set build.context to the folder the Dockerfile copies from (relative to devcontainer.json)",
        )
    archive = tempfile.TemporaryFile()
    try:
        with tarfile.open(fileobj=archive, mode="w") as tar:
            _add_context(tar, root, limits)
            data = dockerfile_text.encode("utf-8")
            info = tarfile.TarInfo(DOCKERFILE_NAME)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        archive.seek(0)
        return archive
    except BaseException:
        archive.close()
        raise


def _add_context(tar: tarfile.TarFile, root: Path, limits: Limits) -> None:
    total, entries = 0, 0
    try:
        for relative in PatternMatcher(_ignore_patterns(root)).walk(str(root)):
            if relative == DOCKERFILE_NAME:
                continue
            entries += 1
            if entries > limits.max_entries:
                raise _too_large(root, f"more than {limits.max_entries} files")
            full = root / relative
            info = tar.gettarinfo(str(full), arcname=relative)
            if info is None:
                continue  # a socket: nothing a build can use
            if info.isfile():
                total += info.size
                if total > limits.max_bytes:
                    raise _too_large(root, f"more than {limits.max_bytes >> 20} MiB")
                with open(full, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    except OSError as exc:
        raise _unreadable(root, exc) from None


def _ignore_patterns(root: Path) -> list[str]:
    """The .dockerignore patterns (the engine's syntax: one a line, `#` comments)."""
    try:
        lines = (root / ".dockerignore").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise ImageError(f"cannot read .dockerignore in the build context {root}: {exc}",
                         hint="make it a readable UTF-8 file, or remove it") from None
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def _too_large(root: Path, what: str) -> ImageError:
    return ImageError(
        f"the build context {root} holds {what}; devsy stopped collecting it",
        hint="set build.context to the folder the Dockerfile copies from, or exclude large folders in .dockerignore",
    )


def _unreadable(root: Path, exc: OSError) -> ImageError:
    name = exc.filename or ""
    try:
        shown = os.path.relpath(name, root) if name else "a file"
    except ValueError:
        shown = name
    return ImageError(
        f"cannot read {shown} in the build context {root}: {exc.strerror or exc}",
        hint="make it readable for devsy, or exclude it in .dockerignore, then run `devsy up` again",
    )
