"""updateRemoteUserUID: give the remote user the host user's uid/gid, so files in a bind-mounted workspace are theirs.

As the reference CLI does (scripts/updateUID.Dockerfile): one image layer on top of the prepared image rewrites the
user's entries in /etc/passwd and /etc/group and chowns its home; the same edge cases (user not found, ids already
equal, a uid another user holds: nothing changes; a gid another group holds: the old gid stays). It applies on a
Linux host when devsy runs as a non-root user, the remote user is a named non-root user and the workspace is a bind
mount, on backends that run images from the host's Docker engine. MicroSandbox needs no layer: its mount presents
the workspace as the remote user's own (the uid=/gid= override, MICROSANDBOX.md). The layer is tagged by a hash of
the base image id, the user and the ids, so a reused or recreated workspace with the same inputs builds nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
from dataclasses import dataclass, replace

import docker

from devsy.devcontainer.image_prepare import PreparedImage, build_labels, engine_build
from devsy.driver.base import Mount, MountType
from devsy.driver.docker.engine import connect, engine_errors
from devsy.progress import Progress

# POSIX sh with cut, grep, sed and chown only: the tools every image that has users has.
_UPDATE_SCRIPT = r"""set -e
# The name compared as a string, not a pattern: a '.' in it must not match another user's line.
line=""
while IFS= read -r entry; do if [ "${entry%%:*}" = "$REMOTE_USER" ]; then line=$entry; break; fi; done < /etc/passwd
name_re=$(printf '%s\n' "$REMOTE_USER" | sed 's/[].[*^$\/]/\\&/g')
if [ -z "$line" ]; then echo "devsy: user ${REMOTE_USER} is not in /etc/passwd: ids not updated"; exit 0; fi
old_uid=$(echo "$line" | cut -d: -f3); old_gid=$(echo "$line" | cut -d: -f4); home=$(echo "$line" | cut -d: -f6)
if [ "$old_uid" = "$NEW_UID" ] && [ "$old_gid" = "$NEW_GID" ]; then echo "devsy: ids already $NEW_UID:$NEW_GID"; exit 0; fi
holder=$(cut -d: -f1,3 /etc/passwd | grep ":${NEW_UID}\$" | cut -d: -f1 | head -n 1 || true)
if [ "$old_uid" != "$NEW_UID" ] && [ -n "$holder" ]; then
  echo "devsy: uid $NEW_UID belongs to $holder: ids not updated"; exit 0
fi
gid=$NEW_GID
group=$(cut -d: -f1,3 /etc/group | grep ":${NEW_GID}\$" | cut -d: -f1 | head -n 1 || true)
if [ "$old_gid" != "$NEW_GID" ] && [ -n "$group" ]; then echo "devsy: gid $NEW_GID belongs to $group: gid kept"; gid=$old_gid; fi
echo "devsy: ${REMOTE_USER} $old_uid:$old_gid -> $NEW_UID:$gid"
sed -i "s/^\(${name_re}:[^:]*:\)[^:]*:[^:]*:/\1${NEW_UID}:${gid}:/" /etc/passwd
if [ "$old_gid" != "$gid" ]; then sed -i "s/^\([^:]*:[^:]*:\)${old_gid}:/\1${gid}:/" /etc/group; fi
if [ -d "$home" ]; then chown -R "${NEW_UID}:${gid}" "$home"; fi
"""


@dataclass(frozen=True)
class HostIds:
    uid: int
    gid: int


def host_ids() -> HostIds | None:
    """The user devsy runs as, when the layer applies to them: on Linux and not root (the reference's rule)."""
    if not sys.platform.startswith("linux") or os.getuid() == 0:
        return None
    return HostIds(os.getuid(), os.getgid())


def needs_uid_layer(enabled: bool, user: str, workspace: Mount, ids: HostIds | None) -> bool:
    return (enabled and ids is not None and workspace.type == MountType.BIND and user not in ("root", "")
            and not user.split(":")[0].isdigit())


def uid_layer(image: PreparedImage, user: str, ids: HostIds, workspace_id: str, *, network_mode: str,
              progress: Progress) -> PreparedImage:
    """`image` with `user`'s uid/gid set to `ids`, built once per base image, user and ids."""
    client = connect()
    try:
        with engine_errors(f"looking up image {image.ref}"):
            base_id = client.images.get(image.ref).id
        key = hashlib.sha256(f"{base_id}\0{user}\0{ids.uid}\0{ids.gid}\0{_UPDATE_SCRIPT}".encode()).hexdigest()
        tag = f"devsy-uid-{workspace_id}:{key[:12]}"
        try:
            client.images.get(tag)
            return replace(image, ref=tag, built_locally=True)
        except docker.errors.ImageNotFound:
            pass
        with progress.step(f"giving {user} your uid {ids.uid} and gid {ids.gid} (updateRemoteUserUID): {tag}"):
            engine_build(client, tag, network_mode, progress, failed=f"updating {user}'s uid in image {tag} failed",
                         hint='set "updateRemoteUserUID": false in devcontainer.json to keep the image\'s ids',
                         fileobj=io.BytesIO(_dockerfile(image, workspace_id).encode()),
                         buildargs={"REMOTE_USER": user, "NEW_UID": str(ids.uid), "NEW_GID": str(ids.gid)})
    finally:
        client.close()
    return replace(image, ref=tag, built_locally=True)


def _dockerfile(image: PreparedImage, workspace_id: str) -> str:
    labels = " ".join(f'"{key}"="{value}"' for key, value in build_labels(workspace_id).items())
    # The labels first: every layer, also one an interrupted build leaves, is found and removed by them.
    return (f"FROM {image.ref}\nLABEL {labels}\nUSER root\nARG REMOTE_USER\nARG NEW_UID\nARG NEW_GID\n"
            f"RUN {json.dumps(['/bin/sh', '-c', _UPDATE_SCRIPT])}\nUSER {image.user or 'root'}\n")
