"""The committed bindings are exactly what the pinned generator produces, and the field numbers are the contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from devsy.driver.base import Capabilities, HostRequirements, RunOptions
from devsy.driver.microsandbox.options import MicrosandboxOptions
from devsy.driver.microsandbox.resources import effective_resources
from devsy.errors import ConfigError
from devsy.redaction import Redactor
from devsy.runtime.proto import generate
from devsy.runtime.sdk import validate
from devsy.runtime.sdk.errors import error_info
from devsy.runtime.v1 import runtime_pb2 as pb
from devsy.runtime.wire import convert


def test_regenerating_the_bindings_gives_identical_bytes(tmp_path: Path) -> None:
    # Needs the pinned grpcio-tools (the `dev` extra); without it generate() fails and says what to install.
    written = generate.generate(tmp_path)
    assert written, "the generator wrote nothing"
    for fresh in written:
        committed = generate.REPO_ROOT / fresh.relative_to(tmp_path)
        assert committed.is_file(), f"{committed} is not committed; run python -m devsy.runtime.proto.generate"
        assert committed.read_bytes() == fresh.read_bytes(), \
            f"{committed} differs from a fresh generation; run python -m devsy.runtime.proto.generate"


@pytest.mark.parametrize(("message", "fields"), [
    (pb.InfoRequest, {"supports_recreate_on_run": 1}),
    (pb.InfoResponse, {"api_major": 1, "api_minor": 2, "driver_name": 3, "driver_version": 4, "runtime_name": 5,
                       "runtime_version": 6, "capabilities": 7}),
    (pb.Capabilities, {"mount_types": 1, "requires_mount_streaming": 2, "requires_workspace_chown": 3,
                       "recreate_mode": 4, "provisioning_preflight": 5, "reprovision": 6, "logs": 7,
                       "reuse_preflight": 8}),
    (pb.ReusePreflightRequest, {"workspace_id": 1, "remote_user": 2}),
    (pb.FindResponse, {"found": 1, "container": 2}),
    (pb.ContainerDetails, {"id": 1, "created_at": 2, "state": 3, "config": 4, "mounts": 5}),
    (pb.ContainerState, {"status": 1, "started_at": 2, "exit_code": 3, "error": 4}),
    (pb.RunImageRequest, {"workspace_id": 1, "image": 2, "image_built_locally": 3, "user": 4, "entrypoint": 5,
                          "args": 6, "environment": 7, "labels": 8, "cap_add": 9, "security_opt": 10,
                          "privileged": 11, "init": 12, "workspace_mount": 13, "mounts": 14, "userns": 15,
                          "uid_map": 16, "gid_map": 17, "platform": 18, "host_requirements": 19,
                          "remote_user": 20, "dockerless": 21, "allow_recreate": 22}),
    (pb.Mount, {"type": 1, "source": 2, "target": 3, "read_only": 4, "options": 5}),
    (pb.HostRequirements, {"cpus": 1, "memory_bytes": 2, "storage_bytes": 3, "gpu": 4}),
    (pb.ExecClientMessage, {"start": 1, "stdin": 2, "close_stdin": 3}),
    (pb.ExecStart, {"workspace_id": 1, "argv": 2, "user": 3, "workdir": 4, "environment": 5, "tty": 6}),
    (pb.ExecServerMessage, {"stdout": 1, "stderr": 2, "exit": 3}),
    (pb.ExecExit, {"exit_code": 1, "signal": 2}),
    (pb.RuntimeError, {"code": 1, "message": 2, "runtime_message": 3, "retryable": 4, "details": 5}),
])
def test_field_numbers_match_the_protocol(message, fields: dict[str, int]) -> None:
    numbers = {f.name: f.number for f in message.DESCRIPTOR.fields}
    assert numbers == fields


def test_enum_values_match_the_protocol() -> None:
    assert [pb.RecreateMode.Value(n) for n in ("RECREATE_MODE_UNSPECIFIED", "RECREATE_MODE_DELETE",
                                               "RECREATE_MODE_STOP", "RECREATE_MODE_ON_RUN")] == [0, 1, 2, 3]
    assert pb.RuntimeErrorCode.Value("RUNTIME_ERROR_CODE_INCOMPATIBLE_VERSION") == 11
    assert pb.MountType.Value("MOUNT_TYPE_TMPFS") == 3
    service = pb.DESCRIPTOR.services_by_name["RuntimeDriver"]
    assert service.full_name == "devsy.runtime.v1.RuntimeDriver"
    assert sorted(m.name for m in service.methods) == sorted(
        ["Info", "Preflight", "ProvisioningPreflight", "ReusePreflight", "Find", "TargetArchitecture", "RunImage",
         "Start", "Stop", "Delete", "Exec", "Logs"])


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _go_run_request(memory_bytes: int, storage_bytes: int) -> bytes:
    """RunImage bytes as a Go host encodes them (uint64 sizes), written by hand so the Python type cannot bend them."""
    sizes = b"\x10" + _varint(memory_bytes) + b"\x18" + _varint(storage_bytes)
    return b"\x0a\x04ws-1" + b"\x12\x03img" + b"\x9a\x01" + _varint(len(sizes)) + sizes


@pytest.mark.parametrize("size", [2**63, 2**64 - 1])
def test_a_go_hosts_uint64_size_reaches_the_driver_unchanged(size: int) -> None:
    request = pb.RunImageRequest.FromString(_go_run_request(size, size))
    options = validate.run_request(request, Capabilities(), lambda: "amd64")
    assert (options.host_requirements.memory_bytes, options.host_requirements.storage_bytes) == (size, size)


def test_the_host_sends_sizes_above_int64_and_names_one_the_wire_cannot_carry() -> None:
    sent = convert.run_request("ws-1", RunOptions(image="img", host_requirements=HostRequirements(
        memory_bytes=2**63, storage_bytes=2**64 - 1)))
    assert pb.RunImageRequest.FromString(sent.SerializeToString()).host_requirements.memory_bytes == 2**63
    with pytest.raises(ConfigError, match=r'"hostRequirements\.storage" \(18446744073709551616 bytes\) is more than'):
        convert.run_request("ws-1", RunOptions(image="img", host_requirements=HostRequirements(storage_bytes=2**64)))


def test_a_size_microsandbox_cannot_honour_is_an_invalid_argument_naming_the_field() -> None:
    # msb takes MiB as uint32: 2^63 bytes is 2^43 MiB. The SDK answers the driver's ConfigError with INVALID_ARGUMENT.
    options = validate.run_request(pb.RunImageRequest.FromString(_go_run_request(2**63, 0)), Capabilities(),
                                   lambda: "amd64")
    with pytest.raises(ConfigError, match=r'"hostRequirements\.memory" is outside what a MicroSandbox VM supports') \
            as caught:
        effective_resources(MicrosandboxOptions(), options.host_requirements, rootfs_dir=False)
    assert error_info(caught.value, Redactor()).code == "INVALID_ARGUMENT"
