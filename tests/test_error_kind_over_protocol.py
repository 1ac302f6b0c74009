"""A provider's typed error keeps devsy's kind across the Runtime Protocol, and a provider cannot abuse that.

The provider puts its error's kind in the RuntimeError details (DETAIL_KIND); the host restores that class only when
it is compatible with the RPC code (devsy.runtime.wire.errors.compatible_kind), else keeps the class of the code, as
for a provider that sends no such key (the Go peers, older devsy). Everything runs a real provider process over real
gRPC; the parity check runs the real CLI on the built-in driver and on its external provider.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy import errors
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.testing import RunningProvider, running
from devsy.runtime.wire.errors import DETAIL_KIND, ImageError, InvalidArgument, PreconditionFailed, \
    UnknownRuntimeError
from helpers.projects import make_project

PROVIDER = Path(__file__).parent / "helpers" / "typed_error_provider.py"
SECRET = "s3cret-ceiling-value-never-shown"
CEILING = ("--provider-option", "MICROSANDBOX_CPUS=2", "--provider-option", "MICROSANDBOX_MAX_CPUS=1")


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProvider]:
    # An executable, as a host runs any provider (`<binary> serve ...`); the helper ignores its arguments.
    binary = tmp_path_factory.mktemp("provider") / "typed-error-provider"
    binary.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(PROVIDER))} \"$@\"\n")
    binary.chmod(0o755)
    with running(ProviderCommand(binary=str(binary))) as started:
        yield started


def _find_error(provider: RunningProvider, **spec: object) -> errors.DevsyError:
    with pytest.raises(errors.DevsyError) as caught:
        provider.client.find(json.dumps(spec))
    return caught.value


def _up(devsy, project: Path, ws_id: str, provider: str, msb_home: Path):
    devsy.created.add(ws_id)
    return devsy.up(project, "--id", ws_id, "--provider", provider, *CEILING, ok=False,
                    extra_env={"MSB_HOME": str(msb_home)})


def test_a_ceiling_refusal_exits_and_reports_the_same_built_in_and_external(devsy, ws_id, msb_home, guest_image,
                                                                           tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", {"image": guest_image, "containerEnv": {"TOKEN": SECRET}})
    results = {name: _up(devsy, project, f"{ws_id}-{n}", name, msb_home)
               for n, name in enumerate(("microsandbox", "external-microsandbox"))}
    seen = {name: (r.returncode, r.json["error"]["type"], r.json["error"]["message"], r.json["error"]["hint"])
            for name, r in results.items()}
    assert seen["microsandbox"] == seen["external-microsandbox"], seen
    exit_code, kind, message, _ = seen["microsandbox"]
    assert (exit_code, kind) == (2, "usage") and "MICROSANDBOX_MAX_CPUS" in message, seen
    for name, result in results.items():
        assert SECRET not in result.text, f"{name} printed the container env value"


@pytest.mark.parametrize("cls", [errors.UsageError, errors.ConfigError, errors.NotFound, errors.RecreateRequired,
                                 errors.BootFailed, errors.ImageError, errors.Cancelled])
def test_a_providers_typed_error_comes_back_as_its_class(provider: RunningProvider,
                                                         cls: type[errors.DevsyError]) -> None:
    error = _find_error(provider, **{"raise": cls.kind, "message": "it failed", "hint": "do this"})
    assert type(error) is cls and error.kind == cls.kind and error.exit_code == cls.exit_code, error
    assert (error.message, error.hint) == ("it failed", "do this")


def test_the_details_carry_nothing_the_message_and_hint_do_not(provider: RunningProvider) -> None:
    error = _find_error(provider, **{"raise": "usage", "message": f"bad value {SECRET}", "hint": f"not {SECRET}",
                                     "secret": SECRET})
    assert isinstance(error, errors.UsageError)
    details = error.details  # type: ignore[attr-defined]
    assert SECRET not in f"{error.message} {error.hint} {details}", (error, details)
    assert set(details.values()) <= {"usage", error.hint}, details


@pytest.mark.parametrize(("code", "details", "expected"), [
    ("INVALID_ARGUMENT", {DETAIL_KIND: "usage"}, errors.UsageError),  # what a devsy provider sends
    ("INVALID_ARGUMENT", {DETAIL_KIND: "no-such-kind"}, InvalidArgument),  # unknown to this host
    ("NOT_FOUND", {DETAIL_KIND: "usage"}, errors.NotFound),  # a kind never changes what the code means
    ("INVALID_ARGUMENT", {DETAIL_KIND: "not-found"}, InvalidArgument),  # (delete treats NotFound as done)
    ("FAILED_PRECONDITION", {DETAIL_KIND: "cancelled"}, PreconditionFailed),  # nor its exit status (130)
    ("UNKNOWN", {DETAIL_KIND: "workspace-not-found"}, UnknownRuntimeError),  # an unclassified error claims nothing
    ("UNKNOWN", {DETAIL_KIND: "reported"}, UnknownRuntimeError),
    ("INVALID_ARGUMENT", {"kind": "usage"}, InvalidArgument),  # no devsy key: today's class of the code
    ("INVALID_ARGUMENT", {}, InvalidArgument),  # a Go peer sends no details at all
    ("RUNTIME_FAILURE", {"kind": "image"}, ImageError),  # an older devsy provider's restored kinds still restore
])
def test_a_details_kind_restores_only_a_class_compatible_with_the_code(provider: RunningProvider, code: str,
                                                                       details: dict[str, str],
                                                                       expected: type[errors.DevsyError]) -> None:
    error = _find_error(provider, code=code, message="refused", details=details)
    assert type(error) is expected, (code, details, type(error))
    assert error.message == "refused"
