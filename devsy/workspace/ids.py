"""Workspace ids: the one name used for folders, locks, SSH hosts and backend instances."""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from devsy.errors import UsageError

if TYPE_CHECKING:  # deriving ids needs devsy.workspace.source; validating them (every `devsy ssh`) does not
    from devsy.workspace.source import Source

MAX_ID_LENGTH = 63  # a DNS label: the id becomes `<id>.devsy` and part of container/VM names
ID_RULE = "1 to 63 characters of lowercase letters, digits and '-', starting with a letter or digit"
_VALID_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_INVALID_RUN = re.compile(r"[^a-z0-9]+")
_SUFFIX_LENGTH = 8


def validate_workspace_id(raw: str) -> str:
    """Return `raw` if it is a valid workspace id, else raise UsageError naming the id and the rule."""
    # fullmatch and `$` differ on a trailing newline; fullmatch rejects it.
    if isinstance(raw, str) and _VALID_ID.fullmatch(raw):
        return raw
    raise UsageError(
        f"invalid workspace id {raw!r}: an id must be {ID_RULE}",
        "pass a valid id with `--id`, e.g. `--id my-project`",
    )


def derive_workspace_id(source: Source) -> str:
    """Derive a stable, valid id from a source: folder name, repository name, or image name plus tag."""
    candidate = _sanitize(_base_name(source))
    suffix = hashlib.sha256(_identity(source).encode("utf-8", "surrogateescape")).hexdigest()[:_SUFFIX_LENGTH]
    if not candidate:
        candidate = f"workspace-{suffix}"
    elif len(candidate) > MAX_ID_LENGTH:
        # Truncated names could collide; the hash of the full source keeps them apart and stable across runs.
        head = candidate[: MAX_ID_LENGTH - _SUFFIX_LENGTH - 1].rstrip("-")
        candidate = f"{head}-{suffix}"
    return validate_workspace_id(candidate)


def _identity(source: Source) -> str:
    from devsy.redaction import redact_url

    # Rotating a token in a git URL must not change the workspace id.
    return f"{source.kind}:{redact_url(source.value)}"


def _base_name(source: Source) -> str:
    if source.kind == "local":
        return PurePosixPath(source.value).name
    if source.kind == "git":
        return _repository_name(source.value)
    return _image_name(source.value)


def _repository_name(url: str) -> str:
    # Covers https://host/org/repo.git, ssh://git@host/org/repo, git@host:org/repo.git and local paths.
    path = url.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    last = re.split(r"[/:\\]", path)[-1]
    return last[: -len(".git")] if last.endswith(".git") else last


def _image_name(reference: str) -> str:
    from devsy.workspace.source import IMAGE_REFERENCE

    match = IMAGE_REFERENCE.match(reference)
    if not match:
        return reference
    name = match.group("name").rsplit("/", 1)[-1]
    if match.group("tag"):
        return f"{name}-{match.group('tag')}"
    if match.group("digest"):
        # Without a tag the digest is the image's identity; a short prefix keeps ids of two digests apart.
        return f"{name}-{match.group('digest').split(':', 1)[1][:12]}"
    return name


def _sanitize(name: str) -> str:
    return _INVALID_RUN.sub("-", name.lower()).strip("-")
