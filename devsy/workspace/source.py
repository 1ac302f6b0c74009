"""What a workspace is built from: a local folder, a git repository, or a container image."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from devsy.errors import UsageError
from devsy.redaction import redact_url

SourceKind = Literal["local", "git", "image"]
GIT_PREFIX = "git:"

# Docker reference grammar (distribution/reference): [domain[:port]/]path(/path)*[:tag][@digest].
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"sha256:[a-f0-9]{64}"
IMAGE_REFERENCE = re.compile(rf"^(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$")
_MAX_IMAGE_NAME = 255

# userinfo in scheme URLs (https://user:token@host/...) is where credentials live.


@dataclass(frozen=True)
class Source:
    """A parsed workspace source; `value` is an absolute path, a git URL or an image reference."""

    kind: SourceKind
    value: str

    def recorded(self) -> Source:
        """The source as a workspace record keeps it: a git URL without its credentials. They are needed only for the
        clone, which runs with the `devsy up` argument itself; a record (a file on disk) never carries a secret."""
        return Source(self.kind, redact_url(self.value)) if self.kind == "git" else self

    def shown(self) -> str:
        """The source as `devsy up` takes it, credentials in a git URL redacted: for hints and messages."""
        return f"{GIT_PREFIX}{redact_url(self.value)}" if self.kind == "git" else self.value


def is_image_reference(text: str) -> bool:
    """True if `text` follows the container image reference grammar."""
    match = IMAGE_REFERENCE.match(text)
    return match is not None and len(match.group("name")) <= _MAX_IMAGE_NAME


def parse_source(text: str, cwd: Path) -> Source:
    """Classify a user-given source: `git:<url>`, an existing directory, or an image reference."""
    if not text or not text.strip():
        raise UsageError("the workspace source is empty", "pass a folder, `git:<url>` or an image reference")
    if text.startswith(GIT_PREFIX):
        return Source("git", _parse_git_url(text[len(GIT_PREFIX) :]))
    if "\0" in text:
        raise UsageError(f"the workspace source {text!r} contains a NUL byte", "pass a folder path or an image")
    path = (cwd / Path(text).expanduser()).resolve()
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except OSError as exc:  # e.g. a folder on the way devsy (your user) may not search, or a name too long
        raise UsageError(f"the workspace source {text!r} cannot be looked at: {exc.strerror} ({path})",
                         "check the folder's permissions for your user, or pass another folder") from exc
    if is_dir:
        return Source("local", str(path))
    if exists:
        raise UsageError(
            f"the workspace source {text!r} is a file, not a folder",
            "pass the folder that contains the project (and its .devcontainer), not a file in it",
        )
    if is_image_reference(text):
        return Source("image", text)
    raise UsageError(
        f"the workspace source {text!r} does not exist as a folder (looked at {path}) "
        "and is not a container image reference",
        "pass an existing folder, `git:<url>` for a repository, "
        "or an image like `mcr.microsoft.com/devcontainers/base:ubuntu`",
    )


def _parse_git_url(url: str) -> str:
    shown = redact_url(url)
    if not url or not url.strip():
        raise UsageError(
            "`git:` is not followed by a repository URL", "pass e.g. `git:https://github.com/org/repo.git`"
        )
    # A leading '-' would reach git as an option (e.g. --upload-pack=...), never as a URL.
    if url.startswith("-") or any(ch.isspace() or ch == "\0" for ch in url):
        raise UsageError(
            f"the git source {shown!r} is not a valid repository URL",
            "pass `git:<url>` with an https, ssh or file URL (or a repository path) without spaces",
        )
    return url
