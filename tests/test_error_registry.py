"""The one registry of error kinds (devsy.errors): every class declares a unique kind, checked when the class is
created; the `--json` outcome carries that kind, and the host and the harness classify by type or kind only."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import docker.errors
import pytest

import devsy
from devsy import errors
from devsy.errors import BootFailed, DevsyError, DriverError, NotFound, WorkspaceNotFound, error_class, \
    registered_kinds
from devsy.redaction import Redactor
from devsy.runtime.sdk.errors import error_info
from devsy.runtime.wire.errors import RESTORED_BY_KIND, InvalidArgument, error_for
from harness.cleanup import NOT_FOUND, FAILED, CleanupRegistry
from harness.commands import CompletedCommand
from harness.outcome import error_of

REPO = Path(__file__).resolve().parents[1]


def _every_devsy_module() -> None:
    for module in pkgutil.walk_packages(devsy.__path__, "devsy."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


def _subclasses(cls: type[DevsyError]) -> list[type[DevsyError]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_the_registry_lists_every_error_class_of_devsy_under_its_own_unique_kind() -> None:
    _every_devsy_module()
    devsy_classes = [c for c in [DevsyError, *_subclasses(DevsyError)] if c.__module__.startswith("devsy")]
    listed = {kind: cls for kind, cls in registered_kinds().items() if cls.__module__.startswith("devsy")}
    print("\n".join(f"{kind:28} {cls.__module__}.{cls.__qualname__}" for kind, cls in sorted(listed.items())))
    # Every class is listed under the kind its own body declares: no class inherits its parent's kind.
    assert sorted(listed.values(), key=id) == sorted(devsy_classes, key=id)
    assert all(cls.__dict__["kind"] == kind for kind, cls in listed.items())
    assert {"not-found", "workspace-not-found", "boot-failed", "msb-command", "runtime-protocol",
            "remote-unreachable", "session-not-opened", "reported"} <= set(listed)


def test_a_duplicate_kind_fails_when_the_class_is_created() -> None:
    with pytest.raises(TypeError, match=r"kind 'not-found', already declared by devsy\.errors\.NotFound"):
        class AnotherNotFound(DriverError):
            kind = "not-found"
    assert error_class("not-found") is NotFound  # the first declaration keeps its kind


def test_a_class_without_its_own_kind_fails_when_it_is_created() -> None:
    with pytest.raises(TypeError, match="declares no `kind`"):
        class Inherits(DriverError):
            pass
    assert error_class(DriverError.kind) is DriverError


def test_the_same_class_defined_again_by_a_reload_or_a_module_run_as_main_is_no_duplicate() -> None:
    probe = ("import importlib, runpy, devsy.ssh.mux.liveness as m; importlib.reload(m); "
             "runpy.run_module('devsy.ssh.mux.liveness', run_name='__main__', alter_sys=True); print('defined')")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", probe], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "defined"), done.stderr


def test_the_wire_layer_gets_boot_failed_without_importing_a_driver() -> None:
    probe = ("import sys, devsy.runtime.wire.errors, devsy.runtime.host.rpc_errors, devsy.runtime.sdk.errors; "
             "print(sorted(m for m in sys.modules if m.startswith(('devsy.driver.microsandbox', 'devsy.driver.docker', "
             "'devsy.driver.remote'))))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"the wire layer imported backend drivers: {done.stdout}"
    from devsy.driver.microsandbox.errors import BootFailed as DriverBootFailed
    assert DriverBootFailed is BootFailed  # the driver raises the very class the wire layer restores


def test_a_python_providers_error_round_trips_to_its_class_only_for_the_restored_kinds() -> None:
    redact = Redactor([])
    for cls in RESTORED_BY_KIND:
        info = error_info(cls("it failed", hint="do this"), redact)
        assert info.details["kind"] == cls.kind
        restored = error_for(info.code, info.message, info.details["hint"], kind=info.details["kind"])
        assert type(restored) is cls and restored.kind == cls.kind, (cls, restored)
    # A kind outside that list keeps the class of its code (the catalogue expects `invalid-argument` here).
    info = error_info(errors.UsageError("bad mount"), redact)
    assert type(error_for(info.code, info.message, kind=info.details["kind"])) is InvalidArgument


def test_the_json_outcome_error_type_is_the_kind_of_a_registered_class(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "devsy", "--home", str(tmp_path / "home"), "delete", "no-such-ws",
                           "--json"], cwd=REPO, capture_output=True, timeout=60)
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error_class(error["type"]) is WorkspaceNotFound, error
    view = error_of(done.stdout)
    assert view is not None and view.is_a(WorkspaceNotFound) and not view.is_a(NotFound)


def _completed(stdout: bytes) -> CompletedCommand:
    return CompletedCommand(argv=["devsy"], exit_code=1, stdout=stdout, stderr=b"", duration=0.0, timed_out=False)


def test_the_harness_takes_not_found_from_the_outcomes_kind_never_from_its_text() -> None:
    from harness.case_context import _workspace_not_found

    gone = {"outcome": "error", "command": "delete", "error": {"type": "not-found", "message": "m", "hint": ""}}
    assert _workspace_not_found(_completed(json.dumps(gone).encode()))
    # A message that quotes a not-found kind is not a not-found outcome.
    other = {"outcome": "error", "command": "delete",
             "error": {"type": "driver", "message": 'engine said "not-found" and "workspace-not-found"', "hint": ""}}
    assert not _workspace_not_found(_completed(json.dumps(other).encode()))
    assert not _workspace_not_found(_completed(b'devsy printed "workspace-not-found" but no outcome'))


def test_cleanup_takes_not_found_by_type_never_by_class_name() -> None:
    class NotFound(Exception):  # some other library's class that merely shares the name
        pass

    def raiser(exc: BaseException):  # type: ignore[no-untyped-def]
        def step() -> None:
            raise exc
        return step

    registry = CleanupRegistry(default_budget=5)
    registry.add("same name, other type", raiser(NotFound("gone?")))
    registry.add("devsy workspace", raiser(WorkspaceNotFound("workspace x does not exist")))
    registry.add("devsy driver", raiser(errors.NotFound("no such container")))
    registry.add("docker image", raiser(docker.errors.ImageNotFound("no such image")))
    assert [r.status for r in registry.run()] == [NOT_FOUND, NOT_FOUND, NOT_FOUND, FAILED]
