"""Where the accounts of the image a sandbox will boot are read from: a rootfs directory, the host's Docker engine
(an unstarted container: nothing of the image runs), or the registry msb will pull from (its layers, top down)."""

from __future__ import annotations

import io
import tarfile
from typing import Any

from devsy.driver.base import LABEL_MANAGED, LABEL_PREFIX
from devsy.driver.microsandbox.image_accounts import (
    MAX_ACCOUNT_FILE,
    MountOwner,
    accounts_from_layers,
    accounts_from_rootfs,
    not_regular,
    read_capped,
    resolve_owner,
    too_large,
)
from devsy.driver.microsandbox.images import _docker_image, is_rootfs_dir  # noqa: PLC2701 - same lookup

# The purpose label of the throwaway container: a sweep after a crash finds it by LABEL_MANAGED + this.
LABEL_PURPOSE = f"{LABEL_PREFIX}purpose"
ACCOUNTS_PURPOSE = "read-image-accounts"
_NEVER_RUN = ["/devsy-never-started"]  # the container is only created, never started: this never runs
_GO_MODE_SYMLINK, _GO_MODE_DIR = 1 << 27, 1 << 31  # Go's os.FileMode bits in Docker's path stat


def workspace_owner(identity: str, image: str, *, built_locally: bool) -> MountOwner:
    """uid:gid of `identity` in the image `image` names (see images.resolve_image for the same three sources)."""
    if is_rootfs_dir(image):
        return resolve_owner(identity, image, lambda wanted: accounts_from_rootfs(image, wanted, image))
    return resolve_owner(identity, image, lambda wanted: _from_engine_or_registry(image, wanted, built_locally))


def _from_engine_or_registry(image: str, wanted: frozenset[str], built_locally: bool) -> dict[str, str | None]:
    # The lookup images.resolve_image makes next, so both agree on where the image comes from.
    api, image_id = _docker_image(image, required=built_locally)
    if api is None or image_id is None:
        from devsy.registry_image import open_layers  # noqa: PLC0415

        with open_layers(image) as layers:
            return accounts_from_layers(layers, wanted, image)
    try:
        return accounts_from_engine(api, image_id, wanted, image)
    finally:
        api.close()


def accounts_from_engine(api: Any, image_id: str, wanted: frozenset[str], image: str) -> dict[str, str | None]:
    """The wanted files of a Docker image, copied out of a created (never started) container, removed afterwards."""
    import docker.errors  # noqa: PLC0415

    from devsy.driver.docker.engine import engine_errors  # noqa: PLC0415

    with engine_errors(f"reading the accounts of image {image}"):
        container = api.create_container(image_id, command=_NEVER_RUN, entrypoint=_NEVER_RUN,
                                         network_disabled=True,
                                         labels={LABEL_MANAGED: "true", LABEL_PURPOSE: ACCOUNTS_PURPOSE})
    try:
        result: dict[str, str | None] = {}
        for path in sorted(wanted):
            with engine_errors(f"reading /{path} of image {image}"):
                try:  # caught here: engine_errors would turn "no such file" into devsy's NotFound
                    chunks, info = api.get_archive(container["Id"], f"/{path}")
                except docker.errors.NotFound:
                    result[path] = None  # the image has no such file: the account lookup says what that means
                    continue
                result[path] = _archived_file(chunks, info, image, path)
        return result
    finally:
        with engine_errors(f"removing the container that read the accounts of image {image}"):
            api.remove_container(container["Id"], force=True, v=True)


def _archived_file(chunks: Any, info: dict[str, Any], image: str, path: str) -> str:
    mode = int(info.get("mode", 0))
    if mode & (_GO_MODE_SYMLINK | _GO_MODE_DIR):
        raise not_regular(image, path)
    if int(info.get("size", 0)) > MAX_ACCOUNT_FILE:
        raise too_large(image, path)
    data = bytearray()
    for chunk in chunks:  # a one-file tar: the file plus headers and padding
        data += chunk
        if len(data) > MAX_ACCOUNT_FILE + 64 * 1024:
            raise too_large(image, path)
    with tarfile.open(fileobj=io.BytesIO(bytes(data)), mode="r:") as archive:
        member = archive.next()
        if member is None or not member.isreg():
            raise not_regular(image, path)
        extracted = archive.extractfile(member)
        assert extracted is not None
        return read_capped(extracted, image, path)
