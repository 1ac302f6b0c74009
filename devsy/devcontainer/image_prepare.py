"""Making the devcontainer's image available on the host's Docker engine: use, pull, or build it.

Images are always prepared with the Docker engine on the host (the MicroSandbox driver later loads them from there),
so this is not part of any driver.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass

import docker.errors

from devsy.devcontainer.config import BuildConfig, DevContainerConfig
from devsy.driver.base import LABEL_MANAGED, LABEL_WORKSPACE
from devsy.driver.docker.engine import connect, engine_errors
from devsy.errors import BackendUnavailable, ImageError
from devsy.progress import Progress


@dataclass(frozen=True)
class PreparedImage:
    ref: str
    built_locally: bool
    user: str  # the image's configured USER ("" = root)


def prepare_image(config: DevContainerConfig, workspace_id: str, *, network_mode: str,
                  progress: Progress) -> PreparedImage:
    client = connect()
    if config.build is not None:
        ref = _build(client, config.build, workspace_id, network_mode, progress)
        return PreparedImage(ref=ref, built_locally=True, user=_image_user(client, ref))
    assert config.image is not None  # load_config guarantees image or build
    ref = config.image
    try:
        with engine_errors(f"looking up image {ref}"):
            user = _image_user(client, ref)
        return PreparedImage(ref=ref, built_locally=False, user=user)
    except ImageError:
        pass
    with progress.step(f"pulling image {ref}"):
        try:
            with engine_errors(f"pulling image {ref}"):
                client.images.pull(ref)
        except Exception as exc:
            raise ImageError(
                f"image {ref} is not available locally and pulling it failed: {getattr(exc, 'message', exc)}",
                hint="check the image name, build the image locally, or make its registry reachable",
            ) from exc
    return PreparedImage(ref=ref, built_locally=False, user=_image_user(client, ref))


def _image_user(client: docker.DockerClient, ref: str) -> str:
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound as exc:
        raise ImageError(f"image {ref} not found") from exc
    return (image.attrs.get("Config") or {}).get("User", "") or ""


def build_tag(build: BuildConfig, workspace_id: str) -> str:
    """A tag that changes when the Dockerfile or build arguments change, so a stale build is never reused by name."""
    digest = hashlib.sha256()
    digest.update(build.dockerfile.read_bytes())
    digest.update(json.dumps({"args": build.args, "target": build.target}, sort_keys=True).encode())
    return f"devsy-build-{workspace_id}:{digest.hexdigest()[:12]}"


def _build(client: docker.DockerClient, build: BuildConfig, workspace_id: str, network_mode: str,
           progress: Progress) -> str:
    if not build.dockerfile.is_file():
        raise ImageError(f"Dockerfile {build.dockerfile} does not exist",
                         hint="fix build.dockerfile in devcontainer.json (it is relative to that file)")
    tag = build_tag(build, workspace_id)
    try:
        dockerfile = str(build.dockerfile.relative_to(build.context))
    except ValueError:
        dockerfile = str(build.dockerfile)  # outside the context: the engine accepts an absolute path
    tail: deque[str] = deque(maxlen=20)
    with progress.step(f"building image {tag}"), engine_errors(f"building image {tag}"):
        stream = client.api.build(
            path=str(build.context), dockerfile=dockerfile, tag=tag, buildargs=build.args or None,
            target=build.target, rm=True, forcerm=True, decode=True,
            network_mode=None if network_mode == "default" else network_mode,
            labels={LABEL_MANAGED: "true", LABEL_WORKSPACE: workspace_id},
        )
        for event in stream:
            if "error" in event:
                raise ImageError(
                    f"building image {tag} failed: {event['error'].strip()}",
                    hint="fix the Dockerfile; the build output ended with:\n" + "".join(tail),
                )
            text = event.get("stream", "")
            if text:
                tail.append(text)
                progress.raw(text.encode())
    return tag


def remove_built_images(workspace_id: str) -> None:
    """Remove the images devsy built for this workspace (found by label). An image still used elsewhere is left in
    place, and a host without a Docker engine has none to remove."""
    try:
        client = connect()
    except BackendUnavailable:
        return
    with engine_errors(f"removing the images built for workspace {workspace_id}"):
        images = client.images.list(filters={"label": [f"{LABEL_MANAGED}=true", f"{LABEL_WORKSPACE}={workspace_id}"]})
        for image in images:
            for tag in image.tags:
                try:
                    client.images.remove(tag)
                except docker.errors.APIError:
                    pass  # in use by another container, or already gone: a cache entry, not workspace state
