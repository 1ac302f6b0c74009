"""Secrets never reach what devsy prints for `up`: hook output, build output, errors and the JSON outcome.

The values are the ones devsy passes on (containerEnv, remoteEnv, build args), a mount source and the content of a
file named as Dockerfile; every test also checks that the ordinary output around them is still shown.
"""

from __future__ import annotations

import pytest

from helpers.cli import HOST_NET
from helpers.projects import make_project
from devsy.devcontainer.image_prepare import remove_built_images

CONTAINER_SECRET = "container-secret-4711"
REMOTE_SECRET = "remote-secret-0815"
BUILD_SECRET = "build-arg-secret-1337"

# Each secret is written in two printf calls, so it may reach devsy split across reads.
HOOK = ("echo hook-visible-out; printf 'c=container-'; printf 'secret-4711\\n'; echo r=$RSECRET; "
        "echo hook-visible-err >&2; echo c=$CSECRET >&2")


@pytest.fixture(autouse=True)
def _remove_build_layers(ws_id):
    """conftest removes tagged images only; a failed build leaves untagged (labelled) layers, removed here."""
    yield
    remove_built_images(ws_id)


def _up_args(as_json: bool) -> tuple[str, ...]:
    return ("--json",) if as_json else ()


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_env_values_echoed_by_a_hook_are_masked_and_the_rest_is_shown(devsy, ws_id, guest_image, tmp_path, as_json):
    project = make_project(tmp_path / "p", {
        "image": guest_image, "containerEnv": {"CSECRET": CONTAINER_SECRET}, "remoteEnv": {"RSECRET": REMOTE_SECRET},
        "onCreateCommand": HOOK,
    })
    result = devsy.run("up", str(project), "--id", ws_id, *HOST_NET, *_up_args(as_json))
    assert result.returncode == 0, result.text
    for secret in (CONTAINER_SECRET, REMOTE_SECRET):
        assert secret.encode() not in result.stdout and secret.encode() not in result.stderr
    for visible in (b"hook-visible-out", b"hook-visible-err", b"c=***", b"r=***"):
        assert visible in result.stderr
    if as_json:
        assert result.json["outcome"] == "success"


def test_a_failing_hook_quotes_its_output_with_the_env_values_masked(devsy, ws_id, guest_image, tmp_path):
    project = make_project(tmp_path / "p", {
        "image": guest_image, "containerEnv": {"CSECRET": CONTAINER_SECRET}, "remoteEnv": {"RSECRET": REMOTE_SECRET},
        "onCreateCommand": HOOK + "; exit 3",
    })
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] == "lifecycle-command" and "hook-visible-out" in error["message"]
    for secret in (CONTAINER_SECRET, REMOTE_SECRET):
        assert secret.encode() not in result.stdout and secret.encode() not in result.stderr


def _build_project(root, args: dict[str, str], run: str):
    project = make_project(root, {"build": {"dockerfile": "Dockerfile", "args": args}})
    (project / ".devcontainer" / "Dockerfile").write_text(
        f"FROM {args['BASE']}\nARG TOKEN\nRUN {run}\n")
    return project


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_a_build_arg_echoed_by_a_run_step_is_masked(devsy, ws_id, guest_image, tmp_path, as_json):
    # The nonce makes the RUN step new for this test, so the engine runs it (a cached step prints nothing).
    project = _build_project(tmp_path / "p", {"BASE": guest_image, "TOKEN": BUILD_SECRET},
                             f"echo build-visible-{ws_id} token=$TOKEN")
    result = devsy.run("up", str(project), "--id", ws_id, *HOST_NET, *_up_args(as_json))
    assert result.returncode == 0, result.text
    assert BUILD_SECRET.encode() not in result.stdout and BUILD_SECRET.encode() not in result.stderr
    assert f"build-visible-{ws_id} token=***".encode() in result.stderr


def test_a_failing_build_quotes_its_output_with_the_build_arg_masked(devsy, ws_id, guest_image, tmp_path):
    project = _build_project(tmp_path / "p", {"BASE": guest_image, "TOKEN": BUILD_SECRET},
                             f"echo build-visible-{ws_id} token=$TOKEN && exit 7")
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] == "image" and f"build-visible-{ws_id}" in error["hint"]
    assert BUILD_SECRET.encode() not in result.stdout and BUILD_SECRET.encode() not in result.stderr


@pytest.mark.parametrize("key", ["mounts", "workspaceMount"])
def test_a_missing_bind_source_is_named_by_its_target_never_by_its_path(devsy, ws_id, guest_image, tmp_path, key):
    missing = tmp_path / "secret-named-folder-that-does-not-exist"
    spec = f"type=bind,source={missing},target=/data"
    project = make_project(tmp_path / "p", {"image": guest_image, key: [spec] if key == "mounts" else spec,
                                            "workspaceFolder": "/data"})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] == "config" and "/data" in error["message"] and "does not exist" in error["message"]
    assert str(missing).encode() not in result.stdout and str(missing).encode() not in result.stderr
    assert b"Traceback" not in result.stderr


def test_a_file_that_is_not_a_dockerfile_is_refused_without_quoting_it(devsy, ws_id, tmp_path):
    first_line = "root:$6$notadockerfile-hash-line:19000:0:99999:7:::"
    shadow = tmp_path / "shadow"
    shadow.write_text(first_line + "\ndaemon:*:19000:0:99999:7:::\n")
    project = make_project(tmp_path / "p", {"build": {"dockerfile": str(shadow)}})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] == "config" and "not a Dockerfile" in error["message"]
    for fragment in (first_line, "notadockerfile-hash-line", "ROOT:"):
        assert fragment.encode() not in result.stdout and fragment.encode() not in result.stderr


def test_an_engine_parse_error_names_the_line_number_not_its_text(devsy, ws_id, guest_image, tmp_path):
    project = make_project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}})
    # The engine quotes an unknown instruction word (upper-cased): a line without spaces is quoted whole.
    (project / ".devcontainer" / "Dockerfile").write_text(f"FROM {guest_image}\nparse-secret-text:line-two\n")
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] in ("image", "driver") and "line 2" in error["message"]
    assert b"parse-secret-text" not in result.stdout.lower() and b"parse-secret-text" not in result.stderr.lower()
