"""Provider options and spec validation: refused with the option named, its value never shown, before any msb call.

MSB_PATH points at a recorder (a stand-in that logs each invocation), so "no msb call happened" is observed, not
assumed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.projects import make_project
from devsy.driver.base import HostRequirements, Mount, MountType, RunOptions
from devsy.driver.microsandbox.driver import MicrosandboxDriver
from devsy.driver.microsandbox.options import MicrosandboxOptions, parse_microsandbox_options
from devsy.driver.microsandbox.resources import effective_resources
from devsy.errors import ConfigError, UsageError


SECRET = "S3cretV4lue"

INVALID = [
    ("MICROSANDBOX_MEMORY", SECRET), ("MICROSANDBOX_MEMORY", "0"), ("MICROSANDBOX_MEMORY", "-512"),
    ("MICROSANDBOX_MEMORY", "4294967296"), ("MICROSANDBOX_MEMORY", "1.5"), ("MICROSANDBOX_CPUS", "256"),
    ("MICROSANDBOX_CPUS", "+2"), ("MICROSANDBOX_MAX_CPUS", "0"), ("MICROSANDBOX_MAX_MEMORY", SECRET),
    ("MICROSANDBOX_STORAGE", "4294967296"), ("MICROSANDBOX_STORAGE", "8G"), ("MICROSANDBOX_BLOCK_EGRESS", SECRET),
    ("MICROSANDBOX_EPHEMERAL", "maybe"), ("MICROSANDBOX_WORKSPACE_HOST_PERMISSIONS", SECRET),
    ("MICROSANDBOX_WORKSPACE_STAT_VIRTUALIZATION", "loose"), ("INACTIVITY_TIMEOUT", "-1s"),
    ("INACTIVITY_TIMEOUT", "500ms"), ("INACTIVITY_TIMEOUT", SECRET),
]


@pytest.mark.parametrize(("name", "value"), INVALID)
def test_invalid_option_is_refused_naming_it_without_its_value(name: str, value: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_microsandbox_options({name: value})
    assert name in caught.value.message
    if len(value) >= 4:  # a short value like "0" occurs in any text by chance
        assert value not in str(caught.value), "an option's value must never appear in an error"


def test_off_with_mirror_and_unknown_options_are_refused() -> None:
    with pytest.raises(UsageError, match="MICROSANDBOX_WORKSPACE_STAT_VIRTUALIZATION=off") as combo:
        parse_microsandbox_options({"MICROSANDBOX_WORKSPACE_STAT_VIRTUALIZATION": "off",
                                    "MICROSANDBOX_WORKSPACE_HOST_PERMISSIONS": "mirror"})
    assert "MICROSANDBOX_WORKSPACE_HOST_PERMISSIONS" in combo.value.message
    with pytest.raises(UsageError, match="MICROSANDBOX_MEMRY") as unknown:
        parse_microsandbox_options({"MICROSANDBOX_MEMRY": "1024"})
    assert "MICROSANDBOX_MEMORY" in unknown.value.hint


def test_valid_options_parse_and_empty_means_runtime_default() -> None:
    parsed = parse_microsandbox_options({
        "MICROSANDBOX_MEMORY": "4096", "MICROSANDBOX_CPUS": "2", "MICROSANDBOX_BLOCK_EGRESS": "TRUE",
        "MICROSANDBOX_EPHEMERAL": "", "INACTIVITY_TIMEOUT": "1h30m", "MICROSANDBOX_WORKSPACE_HOST_PERMISSIONS": "",
    })
    assert parsed == MicrosandboxOptions(memory_mib=4096, cpus=2, block_egress=True, inactivity_timeout_s=5400)
    assert parse_microsandbox_options({"INACTIVITY_TIMEOUT": "90"}).inactivity_timeout_s == 90
    assert parse_microsandbox_options({"INACTIVITY_TIMEOUT": "0"}).inactivity_timeout_s == 0


def test_precedence_is_option_then_host_requirements_then_default() -> None:
    req = HostRequirements(cpus=3, memory_bytes=1536 * 1024**2 + 1, storage_bytes=10 * 1024**3 + 1)
    from_host = effective_resources(MicrosandboxOptions(), req, rootfs_dir=False)
    assert (from_host.memory_mib, from_host.cpus, from_host.storage_gib) == (1537, 3, 11)  # rounded up
    from_options = effective_resources(MicrosandboxOptions(memory_mib=4096, cpus=1, storage_gib=20), req,
                                       rootfs_dir=False)
    assert (from_options.memory_mib, from_options.cpus, from_options.storage_gib) == (4096, 1, 20)
    default = effective_resources(MicrosandboxOptions(), HostRequirements(), rootfs_dir=False)
    assert (default.memory_mib, default.cpus, default.storage_gib) == (2048, None, None)


def test_cli_refuses_invalid_option_before_any_msb_call(devsy, ws_id, tmp_path, recorder: Path) -> None:
    project = make_project(tmp_path / "p", {"image": "devsy-guest:bookworm"})
    result = devsy.up(project, "--id", ws_id, "--provider", "microsandbox",
                      "--provider-option", f"MICROSANDBOX_MEMORY={SECRET}", ok=False,
                      extra_env={"MSB_PATH": str(recorder.parent / "msb-recorder")})
    assert result.returncode == 2 and result.json["error"]["type"] == "usage", result.text
    assert "MICROSANDBOX_MEMORY" in result.json["error"]["message"]
    assert SECRET not in result.text
    assert not recorder.exists(), f"msb was called: {recorder.read_text()}"
    assert not (devsy.home / "workspaces" / ws_id).exists()


def _run_options(folder: Path, **overrides) -> RunOptions:
    base = dict(image="devsy-guest:bookworm", env={"TOKEN": SECRET},
                workspace_mount=Mount(MountType.BIND, "/workspaces/p", str(folder)))
    return RunOptions(**{**base, **overrides})


@pytest.mark.parametrize(("provider", "overrides", "error", "named"), [
    (MicrosandboxOptions(max_cpus=1), {"host_requirements": HostRequirements(cpus=2)}, UsageError,
     "MICROSANDBOX_MAX_CPUS"),
    (MicrosandboxOptions(max_memory_mib=1024), {}, UsageError, "MICROSANDBOX_MAX_MEMORY"),
    (MicrosandboxOptions(ephemeral=True, storage_gib=8, memory_mib=4096), {}, UsageError, "MICROSANDBOX_EPHEMERAL"),
    (MicrosandboxOptions(), {"host_requirements": HostRequirements(cpus=300)}, ConfigError, "hostRequirements.cpus"),
    (MicrosandboxOptions(), {"host_requirements": HostRequirements(memory_bytes=2**33 * 1024**2)}, ConfigError,
     "hostRequirements.memory"),
    (MicrosandboxOptions(storage_gib=8), {"image": "ROOTFS"}, UsageError, "MICROSANDBOX_STORAGE"),
    (MicrosandboxOptions(), {"mounts": [Mount(MountType.BIND, "/data", "/definitely/not/here")]}, ConfigError,
     "/data"),
    (MicrosandboxOptions(), {"mounts": [Mount(MountType.VOLUME, "/v", "bad,name")]}, ConfigError, "/v"),
    (MicrosandboxOptions(), {"mounts": [Mount(MountType.TMPFS, "/a:b")]}, ConfigError, "/a:b"),
])
def test_driver_refuses_invalid_spec_before_any_msb_call(tmp_path: Path, recorder: Path, provider, overrides,
                                                          error, named) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    if overrides.get("image") == "ROOTFS":
        overrides = {**overrides, "image": str(folder)}
    driver = MicrosandboxDriver(provider)
    with pytest.raises(error) as caught:
        driver.run("w1", _run_options(folder, **overrides))
    assert named in caught.value.message
    assert SECRET not in str(caught.value) and "/definitely/not/here" not in str(caught.value)
    assert not recorder.exists(), f"msb was called: {recorder.read_text()}"


def test_bind_source_with_msb_separator_is_refused_without_showing_it(tmp_path: Path, recorder: Path) -> None:
    folder = tmp_path / "my,secret:folder"
    folder.mkdir()
    with pytest.raises(ConfigError) as caught:
        MicrosandboxDriver().run("w1", _run_options(folder))
    assert "workspace mount" in caught.value.message and "secret" not in str(caught.value)
    assert not recorder.exists()
