"""What a sandbox boots: a rootfs directory, a Docker image loaded into msb, or a registry reference msb pulls.

A registry image the host's Docker engine does not hold is pulled by msb itself (`msb pull`, over plain HTTP only for
a loopback registry, as Docker allows; credentials are msb's reading of Docker's config). Builds and local images are
prepared with the host's Docker engine, and this module carries them over: `docker save ID | msb load --tag devsy-image:sha256-<image id>`. The tag is the
image's content digest, so a tag that moves on the host cannot change what a sandbox boots, and an image msb already
holds under that digest is not loaded again.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from devsy.driver.microsandbox.errors import MsbTimeout
from devsy.driver.microsandbox.msb import MsbClient, error_summary, tail
from devsy.driver.microsandbox.naming import loaded_image_tag
from devsy.driver.microsandbox.process import Terminator, stop_group
from devsy.errors import BackendUnavailable, ImageError

LOAD_TIMEOUT_S = 900.0
PULL_TIMEOUT_S = 900.0
INSPECT_TIMEOUT_S = 60.0
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class ResolvedImage:
    ref: str  # what to pass to msb as IMAGE
    pull: str  # msb's --pull policy: always "never": a registry image was pulled before `msb run`
    source: str  # "rootfs", "docker" or "registry"
    loaded: bool = False  # this call ran `msb load` (or `msb pull`)


def is_rootfs_dir(image: str) -> bool:
    """A path (not a reference) naming an existing directory: msb boots the tree as it is."""
    return image.startswith(("/", "./", "../")) and os.path.isdir(image)


def resolve_image(msb: MsbClient, image: str, *, built_locally: bool) -> ResolvedImage:
    if is_rootfs_dir(image):
        return ResolvedImage(os.path.abspath(image), "never", "rootfs")
    api, image_id = _docker_image(image, required=built_locally)
    if api is None or image_id is None:
        pull_registry_image(msb, image)  # not on this host's engine: msb pulls it itself
        return ResolvedImage(image, "never", "registry", loaded=True)
    try:
        tag = loaded_image_tag(image_id)
        if loaded_digest(msb, tag) == image_id:
            return ResolvedImage(tag, "never", "docker")
        # Saved by id, not by reference: the archive then carries no tags of its own (msb would register those
        # too), and a tag that moves after the lookup cannot slip another image under this digest.
        load_docker_image(msb, api, image_id, tag)
    finally:
        api.close()
    if loaded_digest(msb, tag) != image_id:
        raise ImageError(f"`msb load` of {image} reported success, but msb holds no image {tag} with its config "
                         "digest", hint="retry; if it persists, check `msb image ls` and free disk space in MSB_HOME")
    return ResolvedImage(tag, "never", "docker", loaded=True)


def pull_registry_image(msb: MsbClient, image: str, timeout: float = PULL_TIMEOUT_S) -> None:
    """`msb pull` the image (msb skips layers it already holds; an image named by a digest msb holds is not asked
    for at all). `msb run --pull` has no --insecure, so the pull is its own step, and a failure is reported as the
    image's, before any sandbox exists."""
    # Imported here: the Docker SDK's reference parser, only for registry images.
    from devsy.registry_image import is_loopback, parse_reference  # noqa: PLC0415

    if "@sha256:" in image and loaded_digest(msb, image) is not None:
        return  # named by digest and already held: exactly this image, nothing to download
    args = ["pull", "--quiet", *(["--insecure"] if is_loopback(parse_reference(image).registry) else []), image]
    result = msb.run(args, action=f"pulling image {image} with msb", timeout=timeout, check=False)
    if result.returncode != 0:
        raise ImageError(f"`msb pull {image}` failed (exit status {result.returncode}): "
                         f"{error_summary(result.stderr) or 'no message'}",
                         hint="check the image name and that its registry is reachable; for a private registry, "
                         "`docker login REGISTRY` (msb reads Docker's credentials)")


def _docker_image(image: str, *, required: bool) -> tuple[Any, str | None]:
    """(API client, image id) of `image` on the host's Docker engine; (None, None) when it is not there."""
    # Imported here: only `up` with a Docker image pays for importing the Docker SDK.
    from devsy.driver.docker.engine import connect, engine_errors  # noqa: PLC0415

    try:
        client = connect()
    except BackendUnavailable:
        if required:
            raise
        return None, None
    try:
        with engine_errors(f"looking up image {image}"):
            image_id = client.api.inspect_image(image)["Id"]
    except ImageError:
        client.close()
        if required:
            raise ImageError(f"image {image} was built for this workspace but is no longer in the Docker engine",
                             hint="rerun `devsy up`; it builds the image again") from None
        return None, None
    except BaseException:
        client.close()
        raise
    return client.api, image_id


def loaded_digest(msb: MsbClient, tag: str) -> str | None:
    """The config digest (= Docker image id) of msb's image `tag`, or None when msb has no such image."""
    result = msb.run(["image", "inspect", tag, "--format", "json"], action=f"looking up msb image {tag}",
                     timeout=INSPECT_TIMEOUT_S, check=False)
    if result.returncode != 0:
        if any(line.strip() == f"error: image not found: {tag}" for line in result.stderr.splitlines()):
            return None
        raise msb.failure(["image", "inspect", tag], result, action=f"looking up msb image {tag}")
    try:
        return str(json.loads(result.stdout)["config"]["digest"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ImageError(f"`msb image inspect {tag}` printed no config digest",
                         hint="check that msb is 0.7.11 or newer (`msb --version`)") from exc


def load_docker_image(msb: MsbClient, api: Any, ref: str, tag: str, timeout: float = LOAD_TIMEOUT_S) -> None:
    """Stream `docker save ref` (an image id or reference) into `msb load --tag tag`. If the save fails, the load
    is stopped and reaped."""
    with tempfile.TemporaryFile() as output:
        proc = msb.spawn(["load", "--tag", tag], stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT)
        terminator = Terminator(proc)
        watchdog = threading.Timer(timeout, terminator)  # bounds a write blocked on a stuck msb load
        watchdog.daemon = True
        watchdog.start()
        try:
            _feed(proc, api, ref)
            proc.wait()
        except BaseException:
            stop_group(proc)
            raise
        finally:
            watchdog.cancel()
            terminator.disarm()
        output.seek(0)
        printed = output.read().decode(errors="replace")
    if proc.returncode == 0:
        return
    if terminator.fired:
        raise MsbTimeout(f"`msb load` of {ref} did not finish within {timeout:.0f} s and was stopped",
                         hint="check free disk space in MSB_HOME and that `msb` answers, then retry")
    raise ImageError(f"`msb load` of {ref} failed (exit status {proc.returncode}): {error_summary(printed)}",
                     hint="check free disk space in MSB_HOME; msb printed:\n" + tail(printed))


def _feed(proc: subprocess.Popen, api: Any, ref: str) -> None:
    import docker.errors  # noqa: PLC0415

    assert proc.stdin is not None
    try:
        try:
            for chunk in api.get_image(ref, chunk_size=_CHUNK):
                proc.stdin.write(chunk)
        except BrokenPipeError:
            return  # msb load stopped reading: its exit status and output say why
        except (docker.errors.DockerException, OSError) as exc:
            stop_group(proc)  # the save failed: a half-fed load must not linger or be mistaken for success
            explanation = getattr(exc, "explanation", None) or exc
            raise ImageError(f"`docker save {ref}` failed: {explanation}; the msb load was stopped",
                             hint="check that the image exists (`docker image ls`) and the Docker engine is healthy"
                             ) from exc
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()
