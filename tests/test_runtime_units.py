"""Fast checks of the protocol's pure parts: error status round trip, Info validation, redaction, conversions."""

from __future__ import annotations

import grpc
import pytest

from devsy.driver.base import HostRequirements, Mount, MountType, RunOptions
from devsy.driver.reuse import MountPolicy
from devsy.errors import NotFound, RecreateRequired
from devsy.redaction import MASK, Redactor
from devsy.runtime.wire.convert import run_options, run_request
from devsy.runtime.wire.errors import IncompatibleVersion, InvalidProviderInfo, error_for
from devsy.runtime.wire.handshake import parse_line
from devsy.runtime.wire.errors import HandshakeError
from devsy.runtime.host.info_check import validate_info
from devsy.runtime.sdk.reuse import expected_policy
from devsy.runtime.wire.status import GRPC_CODE, RuntimeErrorInfo, to_status
from devsy.runtime.v1 import runtime_pb2 as pb


def _info(**overrides) -> pb.InfoResponse:
    info = pb.InfoResponse(api_major=1, api_minor=3, driver_name="d", driver_version="1", runtime_name="r",
                           capabilities=pb.Capabilities(recreate_mode=pb.RECREATE_MODE_DELETE,
                                                        mount_types=[pb.MOUNT_TYPE_BIND]))
    for name, value in overrides.items():
        if name.startswith("caps_"):
            setattr(info.capabilities, name[5:], value)
        else:
            setattr(info, name, value)
    return info


def test_a_valid_info_is_accepted_and_runtime_version_may_be_empty() -> None:
    described = validate_info(_info(), "p", opted_in_on_run=False)
    assert described.recreate_mode == "delete" and described.runtime_version == ""


@pytest.mark.parametrize(("overrides", "opted_in", "error"), [
    ({"api_major": 2}, True, IncompatibleVersion),
    ({"driver_name": ""}, True, InvalidProviderInfo),
    ({"runtime_name": ""}, True, InvalidProviderInfo),
    ({"caps_recreate_mode": pb.RECREATE_MODE_UNSPECIFIED}, True, InvalidProviderInfo),
    ({"caps_recreate_mode": 7}, True, InvalidProviderInfo),
    ({"caps_recreate_mode": pb.RECREATE_MODE_ON_RUN}, False, InvalidProviderInfo),
    ({"caps_recreate_mode": pb.RECREATE_MODE_ON_RUN, "api_minor": 2}, True, InvalidProviderInfo),
    ({"caps_reuse_preflight": True, "api_minor": 1}, True, InvalidProviderInfo),
])
def test_info_that_would_steer_behaviour_wrongly_is_rejected(overrides, opted_in, error) -> None:
    with pytest.raises(error):
        validate_info(_info(**overrides), "p", opted_in_on_run=opted_in)


def test_info_without_capabilities_is_rejected() -> None:
    info = _info()
    info.ClearField("capabilities")
    with pytest.raises(InvalidProviderInfo, match="capabilities"):
        validate_info(info, "p", opted_in_on_run=True)


def test_on_run_is_accepted_only_from_api_1_3_for_an_opted_in_host() -> None:
    assert validate_info(_info(caps_recreate_mode=pb.RECREATE_MODE_ON_RUN), "p", opted_in_on_run=True).recreate_on_run


def test_error_status_carries_exactly_one_runtime_error_with_the_mapped_code() -> None:
    for code, grpc_code in GRPC_CODE.items():
        status = to_status(RuntimeErrorInfo(code=code, message="m", details={"hint": "h"}))
        assert status.code is grpc_code
        (key, value), = [m for m in status.trailing_metadata if m[0] == "grpc-status-details-bin"]
        from google.rpc import status_pb2

        decoded = status_pb2.Status.FromString(value)
        assert len(decoded.details) == 1 and decoded.details[0].Is(pb.RuntimeError.DESCRIPTOR)
    assert GRPC_CODE["UNSUPPORTED"] is grpc.StatusCode.UNIMPLEMENTED
    assert GRPC_CODE["RUNTIME_FAILURE"] is grpc.StatusCode.INTERNAL


def test_host_errors_are_classified_by_code_and_kind() -> None:
    assert isinstance(error_for("NOT_FOUND", "m"), NotFound)
    assert isinstance(error_for("FAILED_PRECONDITION", "m", kind="recreate-required"), RecreateRequired)
    # A kind that contradicts the code does not win: the code is the contract.
    assert not isinstance(error_for("NOT_FOUND", "m", kind="recreate-required"), RecreateRequired)


def test_redactor_removes_secrets_and_keeps_short_values() -> None:
    redact = Redactor(["s3cret-token", "--password=hunter22", "on"])
    text = redact("token s3cret-token, flag --password=hunter22, raw hunter22, on")
    assert "s3cret" not in text and "hunter22" not in text and text.count(MASK) == 3
    assert text.endswith("on")


def test_run_options_survive_the_wire() -> None:
    options = RunOptions(image="img", user="u", remote_user="dev", entrypoint=["/bin/sh", "-c"], cmd=["sleep 1"],
                         env={"A": "1"}, labels={"k": "v=w"},
                         workspace_mount=Mount(MountType.BIND, "/workspaces/x", "/src", read_only=True),
                         mounts=[Mount(MountType.TMPFS, "/tmp/t")], host_requirements=HostRequirements(cpus=2),
                         allow_recreate=True)
    back = run_options(pb.RunImageRequest.FromString(run_request("ws", options).SerializeToString()))
    assert back.entrypoint == ["/bin/sh"] and back.cmd == ["-c", "sleep 1"]  # same argv, as the protocol splits it
    assert (back.env, back.labels, back.workspace_mount, back.mounts) == (
        options.env, options.labels, options.workspace_mount, options.mounts)
    assert (back.remote_user, back.allow_recreate, back.host_requirements.cpus) == ("dev", True, 2)


def test_provider_side_reuse_policy_follows_the_identity_and_current_version() -> None:
    recorded = MountPolicy(target="/w", read_only=False, owner="dev")
    assert expected_policy(recorded.to_label(), "dev") == recorded
    assert expected_policy(recorded.to_label(), "alt") != recorded
    assert expected_policy("v0;target=/w;mode=rw;owner=dev", "dev") == recorded
    assert expected_policy("", "dev") is None


@pytest.mark.parametrize("line", ["hello", "1|1|unix|/s|netrpc|", "2|1|unix|/s|grpc|", "1|1|tcp|127.0.0.1:1|grpc|",
                                  "1|1|unix||grpc|", "1|1|unix|/s|grpc|CERT"])
def test_bad_handshake_lines_are_rejected(line: str) -> None:
    with pytest.raises(HandshakeError):
        parse_line(line, "p")


def test_an_other_app_version_is_an_incompatible_version() -> None:
    with pytest.raises(IncompatibleVersion, match="major 1"):
        parse_line("1|2|unix|/s|grpc|", "p")
    assert parse_line("1|1|unix|/s/p.sock|grpc|\n", "p").address == "/s/p.sock"
