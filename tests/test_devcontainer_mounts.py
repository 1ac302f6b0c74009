from __future__ import annotations

from typing import Any

import pytest

from devsy.devcontainer.mounts import parse_mount
from devsy.driver.base import Mount, MountType
from devsy.errors import ConfigError

SECRET = "/home/me/.secrets/token-4f9a"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("type=bind,source=/a,target=/b", Mount(MountType.BIND, "/b", "/a", False)),
        ("type=bind,src=/a,dst=/b,readonly", Mount(MountType.BIND, "/b", "/a", True)),
        ("type=bind,source=/a,destination=/b,ro", Mount(MountType.BIND, "/b", "/a", True)),
        ("type=bind,source=/a,target=/b,readonly=true", Mount(MountType.BIND, "/b", "/a", True)),
        ("type=bind,source=/a,target=/b,readonly=false", Mount(MountType.BIND, "/b", "/a", False)),
        ("type=bind,source=/a,target=/b,ro=1", Mount(MountType.BIND, "/b", "/a", True)),
        ("type=bind,source=/a,target=/b,consistency=cached", Mount(MountType.BIND, "/b", "/a", False)),
        ("type=volume,source=cache,target=/cache", Mount(MountType.VOLUME, "/cache", "cache", False)),
        ("type=volume,target=/anon", Mount(MountType.VOLUME, "/anon", "", False)),
        # Docker's default type is volume.
        ("source=named,target=/n", Mount(MountType.VOLUME, "/n", "named", False)),
        ("type=tmpfs,target=/tmp/scratch", Mount(MountType.TMPFS, "/tmp/scratch", "", False)),
        # Keys are case-insensitive and whitespace after commas is tolerated, as users write it.
        ("Type=BIND, Source=/a, Target=/b", Mount(MountType.BIND, "/b", "/a", False)),
        # Docker reads the string as CSV: a quoted field may hold a comma.
        ('type=bind,"source=/a,b",target=/b', Mount(MountType.BIND, "/b", "/a,b", False)),
    ],
)
def test_mount_strings(raw: str, expected: Mount) -> None:
    assert parse_mount(raw, "mounts[0]") == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"type": "bind", "source": "/a", "target": "/b"}, Mount(MountType.BIND, "/b", "/a", False)),
        ({"type": "bind", "source": "/a", "target": "/b", "readonly": True}, Mount(MountType.BIND, "/b", "/a", True)),
        ({"type": "volume", "source": "v", "target": "/v"}, Mount(MountType.VOLUME, "/v", "v", False)),
        ({"type": "tmpfs", "target": "/t"}, Mount(MountType.TMPFS, "/t", "", False)),
    ],
)
def test_mount_objects(raw: dict[str, Any], expected: Mount) -> None:
    assert parse_mount(raw, "mounts[0]") == expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("type=npipe,source=x,target=/b", "unknown mount type 'npipe'"),
        ({"type": "cluster", "source": "x", "target": "/b"}, "unknown mount type 'cluster'"),
        ("type=bind,source=relative/dir,target=/b", "bind source must be an absolute host path"),
        ("type=bind,target=/b", "a bind mount needs a source"),
        ("type=bind,source=/a", "has no target"),
        ("type=bind,source=/a,target=b", "target must be an absolute path"),
        ("type=tmpfs,source=x,target=/t", "a tmpfs mount takes no source"),
        ("type=bind,source=/a,target=/b,readonly=maybe", "readonly must be true or false"),
        ("type=volume,source=v,target=/b,volume-nocopy", "unsupported option 'volume-nocopy'"),
        ({"type": "bind", "source": "/a", "target": "/b", "readonly": "yes"}, '"readonly" must be true or false'),
        ({"type": "bind", "source": 5, "target": "/b"}, '"source" must be a string, got number'),
        ({"type": "bind", "source": "/a", "target": 5}, '"target" must be a string, got number'),
        ({"type": "bind", "src": "/a", "target": "/b"}, "unsupported option 'src'"),
        (42, "must be a mount string or object, got number"),
    ],
)
def test_invalid_mounts_are_config_errors(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as excinfo:
        parse_mount(raw, "/ws/devcontainer.json: mounts[3]")
    assert "mounts[3]" in excinfo.value.message
    assert excinfo.value.hint


def test_errors_name_the_mount_by_index_and_target() -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_mount("type=nfs,source=x,target=/data", "mounts[2]")
    assert excinfo.value.message.startswith("mounts[2] (target /data):")


@pytest.mark.parametrize(
    "raw",
    [
        f"type=weird,source={SECRET},target=/b",
        f"type=bind,source={SECRET}",
        f"type=tmpfs,source={SECRET},target=/t",
        f"type=bind,source={SECRET},target=/b,readonly=perhaps",
        f"type=bind,source={SECRET},target=/b,bind-propagation=rshared",
        # A source written without its key must not be echoed back as an "unknown option".
        f"type=bind,{SECRET},target=/b",
        # A source pasted into the type field must not be echoed back as the "unknown type".
        f"type={SECRET},target=/b",
        {"type": "weird", "source": SECRET, "target": "/b"},
        {"type": "bind", "source": SECRET, "target": "/b", "readonly": "no"},
        {"type": "bind", "source": SECRET, "target": "/b", SECRET: "x"},
    ],
)
def test_mount_sources_never_appear_in_errors(raw: Any) -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_mount(raw, "mounts[0]")
    assert "token-4f9a" not in str(excinfo.value)
    assert ".secrets" not in str(excinfo.value)


def test_relative_bind_source_error_does_not_leak_the_source() -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_mount("type=bind,source=secret-relative-dir,target=/b", "mounts[0]")
    assert "secret-relative-dir" not in str(excinfo.value)
    assert "(target /b)" in excinfo.value.message
