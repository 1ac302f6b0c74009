"""Features installed as image layers on the host's Docker engine, one build per Feature in install order.

Each build starts FROM the previous one (the base image first) with a context holding the Feature's folder, its
options as an env file and a wrapper that exports the spec's _REMOTE_USER/_CONTAINER_USER (and their homes, looked
up in the image as the reference CLI does, here just before each Feature so one that creates the user is seen),
then runs install.sh as root. The Feature's containerEnv becomes ENV before its install (the reference's place),
so it, later Features and the guest see it; USER is the base image's again at the end. One build per Feature
makes a failure name its Feature by construction, and a changed option rebuilds only from that Feature on.

Every image is tagged by a key chained from the base image's id and each Feature's build context (content digest,
options, wrapper, Dockerfile): a second `up` with nothing changed builds nothing. Every layer carries the workspace
labels, so `devsy delete` and a failed first `up` remove them (image_prepare._remove_images).
"""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import IO

import docker
import docker.errors

from devsy.devcontainer.features.model import ResolvedFeature
from devsy.devcontainer.image_prepare import PreparedImage, build_labels, engine_build
from devsy.driver.docker.engine import connect, engine_errors
from devsy.progress import Progress

_IN_IMAGE = "/tmp/devsy-features"
_WRAPPER = "devsy-feature-install.sh"
_ENV_FILE = "devsy-feature.env"
# POSIX sh: a user's home from /etc/passwd by name or uid, compared as strings (no pattern built from the name).
_WRAPPER_HEAD = r"""set -e
home_of() {
  want=${1%%:*}
  while IFS=: read -r name _ uid _ _ home _; do
    if [ "$name" = "$want" ] || [ "$uid" = "$want" ]; then printf '%s' "$home"; return 0; fi
  done < /etc/passwd
}
"""


def tag_repository(workspace_id: str) -> str:
    return f"devsy-features-{workspace_id}"


def feature_layers(base: PreparedImage, features: list[ResolvedFeature], workspace_id: str, *,
                   container_user: str | None, remote_user: str | None, network_mode: str,
                   progress: Progress) -> PreparedImage:
    """`base` with `features` (in install order) installed; each image built at most once per inputs."""
    base_user = base.user or "root"
    # The reference CLI's rule: containerUser, else the image's USER; remoteUser, else that.
    users = {"_CONTAINER_USER": container_user or base_user}
    users["_REMOTE_USER"] = remote_user or users["_CONTAINER_USER"]
    client = connect()
    try:
        with engine_errors(f"looking up image {base.ref}"):
            key = client.images.get(base.ref).id
        ref, tags = base.ref, []
        for index, feature in enumerate(features):
            files = _context_files(feature, users)
            dockerfile = _dockerfile(ref, feature, index, base_user, workspace_id)
            key = _key(key, dockerfile, files)
            tag = f"{tag_repository(workspace_id)}:{key[:16]}"
            tags.append(tag)
            if not _exists(client, tag):
                _build(client, tag, dockerfile, files, feature, network_mode, progress)
            ref = tag
        _remove_stale(client, workspace_id, keep=set(tags))
    finally:
        client.close()
    return replace(base, ref=ref, built_locally=True, pulled_by_backend=False)


def _context_files(feature: ResolvedFeature, users: dict[str, str]) -> dict[str, bytes]:
    """The build context of one Feature: its folder's files under feature/, the env file and the wrapper."""
    # A symlink's target is copied in its place (feature_files checks where it leads): the context holds no links.
    files = {f"feature/{name}": path.read_bytes() for name, path in feature.files().items()}
    env = "".join(f"{name}={shlex.quote(value)}\n" for name, value in feature.option_env().items())
    files[_ENV_FILE] = env.encode()
    lines = [_WRAPPER_HEAD]
    lines += [f"export {name}={shlex.quote(value)}\n" for name, value in users.items()]
    lines += ['export _CONTAINER_USER_HOME="$(home_of "$_CONTAINER_USER")"\n',
              'export _REMOTE_USER_HOME="$(home_of "$_REMOTE_USER")"\n',
              f"set -a\n. ../{_ENV_FILE}\nset +a\n",
              f"echo {shlex.quote(f'devsy: installing Feature {feature.source.shown}')}\n",
              "chmod +x ./install.sh\n./install.sh\n"]
    files[_WRAPPER] = "".join(lines).encode()
    return files


def _dockerfile(ref: str, feature: ResolvedFeature, index: int, base_user: str, workspace_id: str) -> str:
    labels = " ".join(f"{key}={json.dumps(value)}" for key, value in sorted(build_labels(workspace_id).items()))
    folder = f"{_IN_IMAGE}/{index}"
    env = "".join(f"ENV {name}={env_word(value)}\n" for name, value in feature.metadata.container_env.items())
    script = f"cd {folder}/feature && /bin/sh ../{_WRAPPER} && cd / && rm -rf {folder}"
    # The labels first: every layer, also one an interrupted build leaves, is found and removed by them.
    return (f"FROM {ref}\nLABEL {labels}\nUSER root\nCOPY . {folder}/\n{env}"
            f"RUN {json.dumps(['/bin/sh', '-c', script])}\nUSER {base_user}\n")


def env_word(value: str) -> str:
    """`value` as Docker's Dockerfile parser reads it back verbatim in ENV: double-quoted, only \\ and " escaped, as
    the reference CLI writes it (generateContainerEnvs); "$" is left to expand ("/opt/x/bin:${PATH}"), and any other
    character (non-ASCII too) is as is. model.py refuses line breaks, which no Dockerfile line can hold."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _key(previous: str, dockerfile: str, files: dict[str, bytes]) -> str:
    digest = hashlib.sha256(f"{previous}\0".encode())
    # The Dockerfile names the previous tag, which the chained key already covers; FROM is left out of the key.
    digest.update(dockerfile.split("\n", 1)[1].encode())
    for name, data in sorted(files.items()):
        digest.update(f"\0{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def _exists(client: docker.DockerClient, tag: str) -> bool:
    with engine_errors(f"looking up image {tag}"):
        try:
            client.images.get(tag)
            return True
        except docker.errors.ImageNotFound:
            return False


def _build(client: docker.DockerClient, tag: str, dockerfile: str, files: dict[str, bytes],
           feature: ResolvedFeature, network_mode: str, progress: Progress) -> None:
    with progress.step(f"installing Feature {feature.source.shown} ({tag})"), _archive(dockerfile, files) as archive:
        engine_build(client, tag, network_mode, progress, failed=f"installing Feature {feature.source.shown} failed",
                     hint=f"fix the Feature's install.sh ({feature.folder}) or its options in devcontainer.json",
                     fileobj=archive, custom_context=True, dockerfile="Dockerfile")


def _archive(dockerfile: str, files: dict[str, bytes]) -> IO[bytes]:
    archive = tempfile.TemporaryFile()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in {**files, "Dockerfile": dockerfile.encode()}.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    archive.seek(0)
    return archive


def _remove_stale(client: docker.DockerClient, workspace_id: str, keep: set[str]) -> None:
    """Untag this workspace's Feature images of earlier inputs (a changed option); layers in use stay."""
    with engine_errors(f"listing the Feature images of workspace {workspace_id}"):
        images = client.images.list(name=tag_repository(workspace_id))
    for image in images:
        for tag in image.tags or []:
            if tag.startswith(f"{tag_repository(workspace_id)}:") and tag not in keep:
                try:
                    client.images.remove(tag)
                except docker.errors.APIError:
                    pass  # in use by an instance, or a parent of a kept image: a cache entry, not state
