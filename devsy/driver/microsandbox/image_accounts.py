"""Who owns the workspace inside the VM: the developer identity resolved to uid:gid from the image's own accounts.

msb shows a `--mount-dir` to the guest as root:root unless the mount names an owner, so a non-root remoteUser could
not write its workspace (devsy-org/devsy discussion 1237). The numbers must be the image's, not the host's: they are
read from the image's /etc/passwd and /etc/group before anything is created, without running the image (a Docker
image through an unstarted container, a registry image from its layers, a rootfs directory from its tree). Each file
must be a regular file of at most 4 MiB (as the Go driver requires), so a link cannot point the lookup elsewhere.
"""

from __future__ import annotations

import os
import stat
import tarfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, Protocol

from devsy.errors import ConfigError, ImageError

MAX_ACCOUNT_FILE = 4 << 20
PASSWD, GROUP = "etc/passwd", "etc/group"
SCAN_DEADLINE_S = 300.0  # reading layers top-down until both files are found
_ROOT = "root"
# Whiteout names (OCI image spec, "Whiteouts") that hide an account file of every lower layer.
_HIDES = {".wh.etc": (PASSWD, GROUP), ".wh..wh..opq": (PASSWD, GROUP), "etc/.wh..wh..opq": (PASSWD, GROUP),
          "etc/.wh.passwd": (PASSWD,), "etc/.wh.group": (GROUP,)}


@dataclass(frozen=True)
class MountOwner:
    uid: int
    gid: int

    @property
    def is_root(self) -> bool:
        return self.uid == 0 and self.gid == 0


@dataclass(frozen=True)
class Identity:
    """remoteUser as written: NAME, UID, NAME:GROUP or UID:GID (the forms the Go driver accepts)."""

    text: str
    name: str
    group: str
    uid: int | None  # set when `name` is numeric
    gid: int | None  # set when `group` is numeric

    def explicit(self) -> MountOwner | None:
        """The owner when no lookup is needed: root / uid 0 alone, or UID:GID."""
        if not self.group and (self.name == _ROOT or self.uid == 0):
            return MountOwner(0, 0)
        if self.uid is not None and self.gid is not None:
            return MountOwner(self.uid, self.gid)
        return None

    def wanted(self) -> frozenset[str]:
        files = set()
        if self.uid is None or not self.group:
            files.add(PASSWD)
        if self.group and self.gid is None:
            files.add(GROUP)
        return frozenset(files)


def _numeric(value: str, identity: str) -> int | None:
    if not value or not value.isascii() or not value.isdigit():
        return None
    number = int(value)
    if number > 0xFFFFFFFF:
        raise ConfigError(f"remoteUser {identity!r}: the id {value} does not fit in 32 bits",
                          hint="set remoteUser in devcontainer.json to a valid user name or uid")
    return number


def parse_identity(user: str) -> Identity:
    name, sep, group = user.partition(":")
    if not name or (sep and (not group or ":" in group)):
        raise ConfigError(f"remoteUser {user!r} is not a user (NAME, UID, NAME:GROUP or UID:GID)",
                          hint="set remoteUser (or containerUser) in devcontainer.json to one of those forms")
    return Identity(user, name, group, _numeric(name, user), _numeric(group, user))


def owner_from_accounts(identity: Identity, files: dict[str, str | None], image: str) -> MountOwner:
    """uid:gid of `identity` from the image's passwd/group text (None = the image has no such file)."""
    if identity.uid is not None and identity.group:
        uid = identity.uid  # UID:GROUP: the uid is given, only the group is looked up
        gid = _group_id(identity, files.get(GROUP), image)
        return MountOwner(uid, gid)
    uid, gid = _passwd_row(identity, files.get(PASSWD), image)
    if identity.group:
        gid = identity.gid if identity.gid is not None else _group_id(identity, files.get(GROUP), image)
    return MountOwner(uid, gid)


def _passwd_row(identity: Identity, passwd: str | None, image: str) -> tuple[int, int]:
    for line in (passwd or "").split("\n"):
        fields = line.split(":")
        if len(fields) != 7:  # malformed or blank lines are not accounts (as getpwnam skips them)
            continue
        matches = fields[0] == identity.name if identity.uid is None else _numeric(fields[2], "") == identity.uid
        if not matches:
            continue
        uid, gid = _numeric(fields[2], ""), _numeric(fields[3], "")
        if uid is None or gid is None:
            raise ConfigError(f"image {image}: the /etc/passwd entry of user {fields[0]!r} has no valid uid/gid",
                              hint="fix the image's /etc/passwd, or set remoteUser to UID:GID")
        return uid, gid
    if identity.uid is not None:
        return identity.uid, 0  # a uid the image does not list runs with group 0, as Docker runs it
    raise ConfigError(f"remoteUser {identity.text!r} does not exist in image {image} (no such user in its "
                      f"/etc/passwd{'' if passwd is not None else ', which the image does not have'})",
                      hint="create the user in the image (e.g. `useradd` in its Dockerfile), or set remoteUser in "
                      "devcontainer.json to a user the image has; nothing was created")


def _group_id(identity: Identity, groups: str | None, image: str) -> int:
    if identity.gid is not None:
        return identity.gid
    for line in (groups or "").split("\n"):
        fields = line.split(":")
        if len(fields) != 4 or fields[0] != identity.group:
            continue
        gid = _numeric(fields[2], "")
        if gid is None:
            raise ConfigError(f"image {image}: the /etc/group entry of group {identity.group!r} has no valid gid",
                              hint="fix the image's /etc/group, or set remoteUser to NAME:GID")
        return gid
    raise ConfigError(f"remoteUser {identity.text!r}: group {identity.group!r} does not exist in image {image} "
                      "(no such group in its /etc/group)",
                      hint="create the group in the image, or name a group it has; nothing was created")


# -- reading the files ---------------------------------------------------------------------------------------


def not_regular(image: str, path: str) -> ImageError:
    return ImageError(f"image {image}: /{path} is not a regular file, so devsy cannot tell who owns the workspace",
                      hint="make it a regular file in the image (not a link or directory)")


def too_large(image: str, path: str) -> ImageError:
    return ImageError(f"image {image}: /{path} is larger than {MAX_ACCOUNT_FILE >> 20} MiB",
                      hint="an account file that large is not supported; shrink it in the image")


def read_capped(stream: IO[bytes], image: str, path: str) -> str:
    data = stream.read(MAX_ACCOUNT_FILE + 1)
    if len(data) > MAX_ACCOUNT_FILE:
        raise too_large(image, path)
    return data.decode("utf-8", "replace")


def _member_text(archive: tarfile.TarFile, member: tarfile.TarInfo, image: str, path: str) -> str:
    if not member.isreg():
        raise not_regular(image, path)
    if member.size > MAX_ACCOUNT_FILE:
        raise too_large(image, path)
    extracted = archive.extractfile(member)
    assert extracted is not None  # a regular member always has data
    return read_capped(extracted, image, path)


def accounts_from_layers(layers: Iterable[IO[bytes]], wanted: frozenset[str], image: str,
                         deadline_s: float = SCAN_DEADLINE_S) -> dict[str, str | None]:
    """The wanted files from uncompressed-or-gzip tar layers given top-down, honouring whiteouts and opaque
    directories; stops reading once every wanted file is found or hidden."""
    deadline = time.monotonic() + deadline_s
    found: dict[str, str | None] = {}
    hidden: set[str] = set()
    for layer in layers:
        if wanted <= hidden:
            break
        removed: set[str] = set()
        with tarfile.open(fileobj=layer, mode="r|*") as archive:
            for member in archive:
                if time.monotonic() > deadline:
                    raise ImageError(f"reading the accounts of image {image} took longer than {deadline_s:.0f} s",
                                     hint="check the registry's speed, then retry")
                name = os.path.normpath(member.name.lstrip("/"))
                removed.update(f for f in _HIDES.get(name, ()) if f in wanted)
                if name == "etc" and not member.isdir() and not wanted <= hidden:
                    raise ImageError(f"image {image}: /etc is not a directory, so devsy cannot tell who owns the "
                                     "workspace", hint="make /etc a directory in the image")
                if name in wanted and name not in hidden and name not in found:
                    found[name] = _member_text(archive, member, image, name)
        # Found here, or whited out here: either way lower layers no longer count (a whiteout hides lower layers
        # only, not a file this same layer adds).
        hidden |= set(found) | removed
    return {path: found.get(path) for path in wanted}


def accounts_from_rootfs(root: str, wanted: frozenset[str], image: str) -> dict[str, str | None]:
    """The wanted files of a rootfs directory; a link at /etc or at the file is refused (it could point outside)."""
    etc = os.path.join(root, "etc")
    try:
        if not stat.S_ISDIR(os.lstat(etc).st_mode):
            raise ImageError(f"image {image}: /etc is not a directory, so devsy cannot tell who owns the workspace",
                             hint="make /etc a directory in the rootfs")
    except FileNotFoundError:
        return dict.fromkeys(wanted)
    result: dict[str, str | None] = {}
    for path in wanted:
        try:
            fd = os.open(os.path.join(root, path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            result[path] = None
            continue
        except OSError as exc:  # ELOOP: a symlink
            raise not_regular(image, path) from exc
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise not_regular(image, path)
            result[path] = read_capped(handle, image, path)
    return result


class ReadAccounts(Protocol):
    def __call__(self, wanted: frozenset[str]) -> dict[str, str | None]: ...


def resolve_owner(identity_text: str, image: str, read: ReadAccounts) -> MountOwner:
    """uid:gid of the developer identity in `image`; ConfigError naming both when the image has no such user."""
    identity = parse_identity(identity_text)
    explicit = identity.explicit()
    if explicit is not None:
        return explicit
    return owner_from_accounts(identity, read(identity.wanted()), image)
