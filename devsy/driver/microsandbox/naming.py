"""Names devsy gives msb objects: sandboxes (`devsy-<workspace id>`), loaded images, and the labels it reads back."""

from __future__ import annotations

import hashlib
import re

from devsy.errors import UsageError

SANDBOX_PREFIX = "devsy-"
MAX_NAME_BYTES = 128
_HASH_CHARS = 12
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
VOLUME_NAME = _NAME  # msb: "must start with an alphanumeric character and contain only alphanumerics, . - _"

LOADED_IMAGE_REPOSITORY = "devsy-image"
# Comma-separated names of the named volumes devsy created for this sandbox (and so removes with it).
LABEL_CREATED_VOLUMES = "dev.devsy.created-volumes"


def sandbox_name(workspace_id: str) -> str:
    """`devsy-<id>`; past 128 bytes it is cut and ends with `-` + 12 hex chars of sha256(id), so it stays stable."""
    name = SANDBOX_PREFIX + workspace_id
    if not _NAME.fullmatch(name) or not name.isascii():
        raise UsageError(f"workspace id {workspace_id!r} cannot name a MicroSandbox sandbox",
                         hint="use letters, digits, '.', '_' and '-' only")
    if len(name) <= MAX_NAME_BYTES:
        return name
    digest = hashlib.sha256(workspace_id.encode()).hexdigest()[:_HASH_CHARS]
    return f"{name[:MAX_NAME_BYTES - _HASH_CHARS - 1]}-{digest}"


def loaded_image_tag(image_id: str) -> str:
    """The msb reference of a Docker image loaded into msb: named by the image's content digest (its Docker id), so
    a tag that later moves on the host can never change what an existing or new sandbox boots."""
    algorithm, _, hexdigest = image_id.partition(":")
    if algorithm != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", hexdigest):
        raise ValueError(f"not a sha256 image id: {image_id!r}")
    return f"{LOADED_IMAGE_REPOSITORY}:sha256-{hexdigest}"


def created_volumes_label(names: list[str]) -> str:
    return ",".join(names)


def parse_created_volumes(value: str) -> list[str]:
    return [name for name in value.split(",") if VOLUME_NAME.fullmatch(name)]
