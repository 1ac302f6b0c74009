"""Making the devcontainer's image available to the backend: use, pull, or build it.

Builds and local images go through the Docker engine on the host (the MicroSandbox driver later loads them from
there), so this is not part of any driver. A registry image the host's engine does not hold is pulled by that engine,
unless the backend pulls registry images itself (`ProviderRow.pulls_registry_images`: MicroSandbox, with `msb pull`):
then only its config is read from the registry (devsy/registry_image.py), for the image's USER, and Docker never holds it. Every layer devsy builds carries the workspace's labels (build_context.py), so an
interrupted build leaves nothing `devsy delete` or the next `devsy up` cannot find.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

import docker
import docker.errors
import docker.models.containers
import docker.models.images

from devsy.bounded_wait import poll_until
from devsy.devcontainer.build_context import DOCKERFILE_NAME, context_archive, labelled_dockerfile
from devsy.devcontainer.config import BuildConfig, DevContainerConfig
from devsy.devcontainer.features.model import ResolvedFeature
from devsy.devcontainer.features.lockfile import read_lockfile, update_lockfile
from devsy.devcontainer.features.resolve import resolve_features
from devsy.driver.base import LABEL_CREATE_ATTEMPT, LABEL_MANAGED, LABEL_WORKSPACE
from devsy.driver.docker.engine import connect, engine_errors, engine_message
from devsy.errors import BackendUnavailable, DriverError, ImageError
from devsy.progress import Progress
from devsy.registry_image import read_image_config

# Removing an image can free a parent that was held by it; a few passes remove a whole chain of leftovers.
_REMOVE_PASSES = 8
# The engine removes a cancelled build's step container itself (forcerm) a moment after the build's client is gone;
# the wait for that (or for devsy's own removal of it) is bounded, as every wait is.
_BUILD_CONTAINERS_GONE_S = 60.0


@dataclass(frozen=True)
class PreparedImage:
    ref: str
    built_locally: bool
    user: str  # the image's configured USER ("" = root)
    pulled_by_backend: bool = False  # a registry image the backend pulls itself; the host's engine does not hold it
    features: tuple[ResolvedFeature, ...] = ()  # the Features installed in it, in install order


def prepare_image(config: DevContainerConfig, workspace_id: str, *, network_mode: str, progress: Progress,
                  backend_pulls: bool = False, recorded_features: Mapping[str, str] | None = None) -> PreparedImage:
    """The image to run: the config's image or Dockerfile build, with its Features installed (features/layer.py).
    `recorded_features`: Feature id -> digest an earlier up resolved (the result's `features`), so a fetched
    Feature's cached copy is used without asking its registry."""
    # Resolved first: a malformed Feature or option fails the up before anything is pulled or built.
    features = config_features(config, recorded=recorded_features)
    # Feature layers are built on the host's engine, so the base image must be there even when the backend could
    # pull a registry image itself (MicroSandbox then loads the result as it loads a Dockerfile build).
    image = _base_image(config, workspace_id, network_mode=network_mode, progress=progress,
                        backend_pulls=backend_pulls and not features)
    if not features:
        return image
    from devsy.devcontainer.features.layer import feature_layers  # it builds on this module's engine_build

    layered = feature_layers(image, features, workspace_id, container_user=config.container_user,
                             remote_user=config.remote_user, network_mode=network_mode, progress=progress)
    if config.path is not None:
        update_lockfile(config.path, features)  # only a lockfile that exists is kept current, as the reference does
    return dataclasses.replace(layered, features=tuple(features))


def config_features(config: DevContainerConfig, *,
                    recorded: Mapping[str, str] | None = None) -> list[ResolvedFeature]:
    """The config's Features resolved, in install order ([] without any); devcontainer-lock.json's pins apply."""
    if not config.features or config.path is None:
        return []
    return resolve_features(config.features, config.override_feature_install_order, config.path.parent,
                            config.substitution, pins=read_lockfile(config.path), recorded=recorded)


def _base_image(config: DevContainerConfig, workspace_id: str, *, network_mode: str, progress: Progress,
                backend_pulls: bool) -> PreparedImage:
    if config.build is None and backend_pulls:
        assert config.image is not None  # load_config guarantees image or build
        local = _local_image(config.image)
        if local is not None:
            return local
        with progress.step(f"reading the config of image {config.image} from its registry"):
            found = read_image_config(config.image)
        # By digest: the backend pulls exactly the image whose USER was read, even if the tag moves meanwhile.
        return PreparedImage(ref=found.pinned, built_locally=False, user=found.user, pulled_by_backend=True)
    client = connect()
    if config.build is not None:
        ref = _build(client, config.build, workspace_id, network_mode, progress)
        with engine_errors(f"looking up the built image {ref}"):
            user = _image_user(client, ref)
        return PreparedImage(ref=ref, built_locally=True, user=user)
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
        except BackendUnavailable:
            raise
        except Exception as exc:
            raise ImageError(
                f"image {ref} is not available locally and pulling it failed: {getattr(exc, 'message', exc)}",
                hint="check the image name, build the image locally, or make its registry reachable",
            ) from exc
    with engine_errors(f"looking up the pulled image {ref}"):
        user = _image_user(client, ref)
    return PreparedImage(ref=ref, built_locally=False, user=user)


def _local_image(ref: str) -> PreparedImage | None:
    """`ref` as the host's Docker engine holds it, or None when it does not (or there is no engine to ask)."""
    try:
        client = connect()
    except BackendUnavailable:
        return None  # a MicroSandbox host need not run Docker for registry images
    try:
        with engine_errors(f"looking up image {ref}"):
            return PreparedImage(ref=ref, built_locally=False, user=_image_user(client, ref))
    except (ImageError, BackendUnavailable):
        return None
    finally:
        client.close()


def _image_user(client: docker.DockerClient, ref: str) -> str:
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound as exc:
        raise ImageError(f"image {ref} not found") from exc
    return (image.attrs.get("Config") or {}).get("User", "") or ""


def build_labels(workspace_id: str) -> dict[str, str]:
    return {LABEL_MANAGED: "true", LABEL_WORKSPACE: workspace_id}


def build_tag(build: BuildConfig, dockerfile_text: str, workspace_id: str) -> str:
    """A tag that changes when the Dockerfile or build arguments change, so a stale build is never reused by name."""
    digest = hashlib.sha256()
    digest.update(dockerfile_text.encode("utf-8"))
    digest.update(json.dumps({"args": build.args, "target": build.target}, sort_keys=True).encode())
    return f"devsy-build-{workspace_id}:{digest.hexdigest()[:12]}"


def _build(client: docker.DockerClient, build: BuildConfig, workspace_id: str, network_mode: str,
           progress: Progress) -> str:
    if not build.dockerfile.is_file():
        raise ImageError(f"Dockerfile {build.dockerfile} does not exist",
                         hint="fix build.dockerfile in devcontainer.json (it is relative to that file)")
    dockerfile = labelled_dockerfile(build, build_labels(workspace_id))
    tag = build_tag(build, dockerfile.text, workspace_id)
    with progress.step(f"building image {tag}"), context_archive(build, dockerfile.text) as archive:
        try:
            _run_build(client, build, archive, tag, network_mode, progress)
        except DriverError as exc:
            # Line numbers the engine gives are of devsy's labelled copy; the user knows their own file.
            exc.message = dockerfile.in_user_lines(exc.message)
            raise
    _remove_images(client, workspace_id, keep=tag)  # earlier builds of this workspace; untagged layers stay as cache
    return tag


def _run_build(client: docker.DockerClient, build: BuildConfig, archive: IO[bytes], tag: str, network_mode: str,
               progress: Progress) -> None:
    engine_build(client, tag, network_mode, progress, failed=f"building image {tag} failed",
                 hint="fix the Dockerfile", fileobj=archive, custom_context=True, dockerfile=DOCKERFILE_NAME,
                 buildargs=build.args or None, target=build.target)


def engine_build(client: docker.DockerClient, tag: str, network_mode: str, progress: Progress, *, failed: str,
                 hint: str, **build: Any) -> None:
    """One image build on the host's engine, its output shown as it comes; a failure is an ImageError (`failed`:
    the engine's message, then `hint` and the output's last 20 lines). `build`: the engine API's build arguments."""
    tail: deque[str] = deque(maxlen=20)
    with engine_errors(f"building image {tag}"):
        stream = client.api.build(tag=tag, rm=True, forcerm=True, decode=True,
                                  network_mode=None if network_mode == "default" else network_mode, **build)
        for event in stream:
            if "error" in event:
                raise ImageError(f"{failed}: {engine_message(event['error'].strip())}",
                                 hint=f"{hint}; the build output ended with:\n" + "".join(tail))
            text = event.get("stream", "")
            if text:
                tail.append(text)
                progress.raw(text.encode())


def remove_built_images(workspace_id: str) -> None:
    """Remove the images devsy built for this workspace, intermediate layers too (found by label). An image still
    used elsewhere is left in place, and a host without a Docker engine has none to remove."""
    try:
        client = connect()
    except BackendUnavailable:
        return
    _remove_images(client, workspace_id, keep=None)


def _remove_images(client: docker.DockerClient, workspace_id: str, keep: str | None) -> None:
    """Remove this workspace's labelled images. After a build (`keep` = its tag) only the other tags go: untagged
    layers, also those an interrupted build left, are the build cache the next `up` reuses. Without `keep`
    (delete) every layer goes. Images in use stay: a cache entry, not workspace state."""
    labels = [f"{key}={value}" for key, value in build_labels(workspace_id).items()]
    with engine_errors(f"removing the images built for workspace {workspace_id}"):
        if keep is None:
            _remove_build_containers(client, workspace_id, labels)
        for _ in range(_REMOVE_PASSES):
            images = client.images.list(all=keep is None, filters={"label": labels})
            stale = [i for i in images if keep not in (i.tags or []) and (keep is None or i.tags)]
            if not sum(_remove(client, image) for image in stale):
                return


def _remove_build_containers(client: docker.DockerClient, workspace_id: str, labels: list[str]) -> None:
    """Remove the step containers of this workspace's interrupted builds, and see them gone: each holds the layer
    it ran on (and so the chain below it), and an interrupted up's rollback runs before the engine has removed the
    container of the step it cancelled. An image removal refused meanwhile would leave every layer behind."""
    for container in _build_containers(client, labels):
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: the engine is removing it already; the wait below sees it go
                raise
    poll_until(lambda: [c.short_id for c in _build_containers(client, labels)], lambda left: not left,
               timeout=_BUILD_CONTAINERS_GONE_S, interval=0.2,
               what=f"the removal of the build containers of workspace {workspace_id}",
               hint=f"see `docker ps -a --filter label={LABEL_WORKSPACE}={workspace_id}`; remove those containers "
                    f"(docker rm -f), then their images: `docker image prune -a --filter "
                    f"label={LABEL_WORKSPACE}={workspace_id}`")


def _build_containers(client: docker.DockerClient, labels: list[str]) -> list[docker.models.containers.Container]:
    """Containers of this workspace's image builds. A build step's container carries the labels of the image being
    built, as an instance does; what tells it apart: the engine creates it from the previous step's image id, and
    without the create-attempt label devsy gives every instance it creates (runner.py)."""
    # ignore_removed: a container the engine removes between its listing and its inspection is simply gone.
    found = client.containers.list(all=True, filters={"label": labels}, ignore_removed=True)
    return [c for c in found if LABEL_CREATE_ATTEMPT not in (c.labels or {})
            and (c.attrs.get("Config") or {}).get("Image", "").startswith("sha256:")]


def _remove(client: docker.DockerClient, image: docker.models.images.Image) -> int:
    """Untag (or remove, when untagged) one image; 0 when the engine refuses (in use, has children, gone)."""
    try:
        for tag in image.tags or [image.id]:
            client.images.remove(tag)
    except docker.errors.APIError:
        return 0
    return 1
