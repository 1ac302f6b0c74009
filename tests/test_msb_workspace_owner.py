"""The workspace folder inside a MicroSandbox VM is owned by the developer identity, as the image's own accounts say.

msb shows a `--mount-dir` as root:root unless the mount names `uid=U,gid=G`; devsy reads U and G from the image's
/etc/passwd and /etc/group before anything is created (devsy-org/devsy discussion 1237).
"""

from __future__ import annotations

import io
import json
import os
import secrets
import subprocess
import tarfile
from pathlib import Path

import pytest

from devsy.driver.base import LABEL_MANAGED, Mount, MountType, RunOptions
from devsy.driver.microsandbox.driver import MicrosandboxDriver
from devsy.driver.microsandbox.image_accounts import (
    GROUP,
    MAX_ACCOUNT_FILE,
    PASSWD,
    MountOwner,
    accounts_from_layers,
    accounts_from_rootfs,
    parse_identity,
    resolve_owner,
)
from devsy.driver.microsandbox.image_owner import ACCOUNTS_PURPOSE, LABEL_PURPOSE, workspace_owner
from devsy.driver.microsandbox.mounts import WorkspaceMountPolicy
from devsy.driver.microsandbox.spec import build_spec
from devsy.driver.reuse import MountPolicy
from devsy.errors import ConfigError, ImageError
from devsy.providers.microsandbox import split_policy
from helpers.msb import REAL_MSB, images, sandboxes, volumes
from helpers.projects import make_project

PASSWD_TEXT = ("root:x:0:0:root:/root:/bin/sh\n"
               "this line is malformed\n"
               "broken:x:1:\n"
               "dev:x:1000:1000::/home/dev:/bin/sh\n"
               "alt:x:1001:1001::/home/alt:/bin/sh\n")
GROUP_TEXT = "root:x:0:\ndev:x:1000:\nalt:x:1001:\ndevelopers:x:1500:dev\n"


def _owner(user: str, passwd: str | None = PASSWD_TEXT, group: str | None = GROUP_TEXT) -> MountOwner:
    return resolve_owner(user, "img:1", lambda wanted: {PASSWD: passwd, GROUP: group})


# -- pure rows -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("user", "expected"), [
    ("dev", (1000, 1000)), ("alt", (1001, 1001)), ("1001", (1001, 1001)), ("dev:developers", (1000, 1500)),
    ("dev:1001", (1000, 1001)), ("1000:developers", (1000, 1500)), ("4000:4001", (4000, 4001)),
    ("root", (0, 0)), ("0", (0, 0)),
])
def test_identity_forms_resolve_from_the_image_rows(user, expected):
    assert _owner(user) == MountOwner(*expected)


def test_a_uid_the_image_does_not_list_runs_with_group_0_as_on_docker():
    assert _owner("4242") == MountOwner(4242, 0)


def test_root_and_uid_gid_need_no_lookup():
    def never(wanted):
        raise AssertionError(f"read {wanted}")

    assert resolve_owner("root", "img", never) == MountOwner(0, 0)
    assert resolve_owner("1234:99", "img", never) == MountOwner(1234, 99)
    assert parse_identity("dev:developers").wanted() == {PASSWD, GROUP}
    assert parse_identity("dev").wanted() == {PASSWD}


@pytest.mark.parametrize(("user", "passwd", "named"), [
    ("nosuch", PASSWD_TEXT, "nosuch"), ("broken", PASSWD_TEXT, "broken"),
    ("dev", None, "dev"), ("dev:nogroup", PASSWD_TEXT, "nogroup"),
])
def test_missing_user_or_group_is_a_config_error_naming_it_and_the_image(user, passwd, named):
    with pytest.raises(ConfigError) as caught:
        _owner(user, passwd)
    assert named in caught.value.message and "img:1" in caught.value.message
    assert caught.value.hint


@pytest.mark.parametrize("user", ["", ":x", "dev:", "a:b:c"])
def test_malformed_identity_is_refused(user):
    with pytest.raises(ConfigError):
        parse_identity(user)


def _rootfs(tmp_path: Path, passwd: bytes = PASSWD_TEXT.encode()) -> Path:
    (tmp_path / "root" / "etc").mkdir(parents=True)
    (tmp_path / "root" / "etc" / "passwd").write_bytes(passwd)
    (tmp_path / "root" / "etc" / "group").write_text(GROUP_TEXT)
    return tmp_path / "root"


def test_rootfs_oversized_and_non_regular_files_are_refused(tmp_path):
    root = _rootfs(tmp_path, b"x" * (MAX_ACCOUNT_FILE + 1))
    with pytest.raises(ImageError, match="larger than 4 MiB"):
        accounts_from_rootfs(str(root), frozenset({PASSWD}), "rootfs")
    (root / "etc" / "passwd").unlink()
    (root / "etc" / "passwd").symlink_to("/etc/passwd")  # the host's: must never be read
    with pytest.raises(ImageError, match="not a regular file"):
        accounts_from_rootfs(str(root), frozenset({PASSWD}), "rootfs")
    (root / "etc" / "passwd").unlink()
    os.mkfifo(root / "etc" / "passwd")
    with pytest.raises(ImageError, match="not a regular file"):
        accounts_from_rootfs(str(root), frozenset({PASSWD}), "rootfs")


def _layer(*entries: tuple[str, bytes | None] | tarfile.TarInfo) -> io.BytesIO:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                archive.addfile(entry)
                continue
            name, data = entry
            info = tarfile.TarInfo(name)
            info.size = len(data or b"")
            archive.addfile(info, io.BytesIO(data or b""))
    out.seek(0)
    return out


def _from_layers(user: str, *top_down: io.BytesIO) -> MountOwner:
    return resolve_owner(user, "img", lambda wanted: accounts_from_layers(iter(top_down), wanted, "img"))


BASE = (("etc/passwd", PASSWD_TEXT.encode()), ("etc/group", GROUP_TEXT.encode()))
NEW_DEV = b"dev:x:2345:2345::/home/dev:/bin/sh\n"


@pytest.mark.parametrize("marker", ["etc/.wh.passwd", ".wh.etc", ".wh..wh..opq", "etc/.wh..wh..opq"])
def test_layers_honour_whiteouts_and_opaque_directories(marker):
    assert _from_layers("dev", _layer(("unrelated", b"")), _layer(*BASE)) == MountOwner(1000, 1000)
    with pytest.raises(ConfigError, match="'dev' does not exist"):  # deleted above the base: not found
        _from_layers("dev", _layer((marker, b"")), _layer(*BASE))
    # Deleted and recreated in the same layer: the new file counts, the lower one does not.
    assert _from_layers("dev", _layer((marker, b""), ("etc/passwd", NEW_DEV)), _layer(*BASE)) == MountOwner(2345, 2345)


def test_layers_refuse_a_link_an_oversized_file_and_a_linked_etc():
    link = tarfile.TarInfo("etc/passwd")
    link.type, link.linkname = tarfile.SYMTYPE, "../../outside"
    with pytest.raises(ImageError, match="not a regular file"):
        _from_layers("dev", _layer(link), _layer(*BASE))
    with pytest.raises(ImageError, match="larger than"):
        _from_layers("dev", _layer(("etc/passwd", b"x" * (MAX_ACCOUNT_FILE + 1))))
    etc = tarfile.TarInfo("etc")
    etc.type, etc.linkname = tarfile.SYMTYPE, "other"
    with pytest.raises(ImageError, match="/etc is not a directory"):
        _from_layers("dev", _layer(etc), _layer(*BASE))
    # A bad file that the identity does not need does not block it (dev alone needs no /etc/group).
    assert _from_layers("dev", _layer(("etc/group", b"x" * (MAX_ACCOUNT_FILE + 1))), _layer(*BASE)) \
        == MountOwner(1000, 1000)


# -- real images -------------------------------------------------------------------------------------------------

def _build(docker_client, dockerfile: str) -> str:
    tag = f"devsy-owner-test:{secrets.token_hex(4)}"
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, network_mode="host", rm=True,
                               forcerm=True, timeout=600)
    return tag


@pytest.fixture
def built(docker_client, guest_image):
    tags: list[str] = []
    yield lambda dockerfile: tags.append(_build(docker_client, dockerfile.format(base=guest_image))) or tags[-1]
    for tag in tags:
        docker_client.images.remove(tag, force=True)


MOVED_DEV = "FROM {base}\nRUN groupmod -g 2345 dev && usermod -u 2345 -g 2345 dev\n"
DELETED_PASSWD = "FROM {base}\nRUN rm /etc/passwd\n"
RECREATED_PASSWD = "FROM {base}\nRUN rm /etc/passwd\nRUN echo 'dev:x:3456:1001::/home/dev:/bin/sh' > /etc/passwd\n"


def _accounts_containers(docker_client) -> list:
    return docker_client.containers.list(all=True, filters={"label": f"{LABEL_PURPOSE}={ACCOUNTS_PURPOSE}"})


def test_docker_images_resolve_from_their_own_accounts(docker_client, guest_image, built):
    before = {c.id for c in _accounts_containers(docker_client)}
    assert workspace_owner("dev", guest_image, built_locally=False) == MountOwner(1000, 1000)
    assert workspace_owner("alt", guest_image, built_locally=False) == MountOwner(1001, 1001)
    assert workspace_owner("dev:alt", guest_image, built_locally=False) == MountOwner(1000, 1001)
    assert workspace_owner("dev", built(MOVED_DEV), built_locally=True) == MountOwner(2345, 2345)
    with pytest.raises(ConfigError) as caught:
        workspace_owner("nosuch", guest_image, built_locally=False)
    assert "'nosuch'" in caught.value.message and guest_image in caught.value.message
    with pytest.raises(ConfigError, match="does not have"):  # no /etc/passwd at all: the account error, not the engine's
        workspace_owner("dev", built(DELETED_PASSWD), built_locally=True)
    with pytest.raises(ConfigError, match="no-such-group"):
        workspace_owner("dev:no-such-group", guest_image, built_locally=False)
    assert {c.id for c in _accounts_containers(docker_client)} == before  # each reader removed its container


def test_registry_images_resolve_from_their_layers(docker_client, guest_image, built):
    from fixtures.oci_registry import OciRegistry

    moved, deleted, recreated = built(MOVED_DEV), built(DELETED_PASSWD), built(RECREATED_PASSWD)
    with OciRegistry() as registry:
        refs = {name: registry.push(tag, f"owner/{name}:1") for name, tag in
                (("guest", guest_image), ("moved", moved), ("deleted", deleted), ("recreated", recreated))}
        assert workspace_owner("dev", refs["guest"], built_locally=False) == MountOwner(1000, 1000)
        assert workspace_owner("alt", refs["guest"], built_locally=False) == MountOwner(1001, 1001)
        assert workspace_owner("dev", refs["moved"], built_locally=False) == MountOwner(2345, 2345)
        assert workspace_owner("dev", refs["recreated"], built_locally=False) == MountOwner(3456, 1001)
        with pytest.raises(ConfigError, match="'dev' does not exist"):  # the whiteout hides the base's passwd
            workspace_owner("dev", refs["deleted"], built_locally=False)
    for ref in refs.values():  # read from the registry only: the engine never got these references
        assert not docker_client.images.list(name=ref.rsplit(":", 1)[0])


# -- what msb is given -------------------------------------------------------------------------------------------

def _options(image: str, remote_user: str, folder: Path) -> RunOptions:
    policy = MountPolicy("/workspaces/p", False, remote_user)
    return RunOptions(image=image, remote_user=remote_user,
                      workspace_mount=Mount(MountType.BIND, "/workspaces/p", str(folder)),
                      labels={LABEL_MANAGED: "true", "dev.devsy.mount-policy": policy.to_label()})


def test_msb_gets_the_owner_on_the_workspace_mount(tmp_path, msb_home, no_boot):
    root = _rootfs(tmp_path)
    folder = tmp_path / "ws"
    folder.mkdir()
    driver = MicrosandboxDriver()
    options = _options(str(root), "dev", folder)
    spec = build_spec("owner-argv", options, driver.options, rootfs_dir=True,
                      owner=driver._workspace_owner(options)).with_image(str(root), pull="never")
    argv = spec.argv()
    assert f"{folder}:/workspaces/p:rw,stat-virt=strict,host-perms=private,uid=1000,gid=1000" in argv
    assert "uid=1000;gid=1000" in spec.labels["dev.devsy.mount-policy"]
    # The real msb parses it as the owner of the mount (`create`: the same flags, and the sandbox stays to inspect).
    env = {**os.environ, "MSB_HOME": str(msb_home), "MSB_LIBKRUNFW_PATH": str(no_boot)}
    subprocess.run([REAL_MSB, "create", *argv[2:]], env=env, capture_output=True, timeout=120)
    shown = subprocess.run([REAL_MSB, "inspect", spec.name, "--format", "json"], env=env, capture_output=True,
                           timeout=60, check=True)
    mount = json.loads(shown.stdout)["config"]["mounts"][0]
    assert (mount["options"]["override_uid"], mount["options"]["override_gid"]) == (1000, 1000)


def test_recorded_owner_is_msb_presentation_for_the_host(tmp_path):
    label = MountPolicy("/w", False, "dev").with_extras(
        WorkspaceMountPolicy(owner=MountOwner(1000, 1000)).items()).to_label()
    base, presentation = split_policy(MountPolicy.from_label(label))
    assert base == MountPolicy("/w", False, "dev")  # what the host compares itself: no msb keys
    assert dict(presentation) == {"stat-virt": "strict", "host-perms": "private", "uid": "1000", "gid": "1000"}
    assert "uid" not in dict(WorkspaceMountPolicy(owner=MountOwner(0, 0)).items())  # root: as before
    assert "uid" not in dict(WorkspaceMountPolicy("off", owner=MountOwner(1000, 1000)).items())  # msb refuses it


def test_unknown_remote_user_fails_before_anything_is_created(devsy, ws_id, tmp_path, msb_home, no_boot, guest_image):
    project = make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "nosuch"})
    result = devsy.up(project, "--id", ws_id, "--provider", "microsandbox", ok=False, timeout=600,
                      extra_env={"MSB_HOME": str(msb_home), "MSB_LIBKRUNFW_PATH": str(no_boot)})
    assert result.returncode == 1, result.text
    error = result.json["error"]
    assert error["type"] == "config", error
    assert "'nosuch' does not exist in image" in error["message"] and guest_image in error["message"]
    assert error["hint"]
    assert sandboxes(msb_home) == [] and volumes(msb_home) == [] and images(msb_home) == []
    assert not (devsy.home / "workspaces" / ws_id).exists()
