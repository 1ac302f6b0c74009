"""`devsy exec` carries the guest's bytes unaltered: no --env value and no DEVSY_REDACT entry is masked in them.

Redaction is for what devsy itself prints (errors, progress, stored logs); a session's output is the guest's, and
masking a value in it corrupts any output that happens to contain that value (`true`, a binary's `GLIBC`).
"""

from __future__ import annotations

import hashlib

import pytest

from helpers.cli import HOST_NET
from helpers.projects import make_project

PROVIDERS = {"docker": [], "external-docker": ["--provider", "external-docker"]}


@pytest.fixture(params=sorted(PROVIDERS))
def workspace(request, devsy, ws_id, guest_image, tmp_path) -> str:
    devsy.up(make_project(tmp_path / "p", {"image": guest_image}), "--id", ws_id, *PROVIDERS[request.param], *HOST_NET)
    return ws_id


def test_an_env_value_in_the_output_is_not_masked(devsy, workspace):
    result = devsy.run("exec", workspace, "--env", "FLAG=true", "--", "echo", "true")
    assert (result.returncode, result.stdout) == (0, b"true\n"), result.stderr


def test_a_binary_is_byte_exact_whatever_env_values_or_redact_entries_it_contains(devsy, workspace, docker_client):
    container = docker_client.containers.list(filters={"label": f"dev.devsy.workspace={workspace}"})[0]
    code, expected = container.exec_run(["cat", "/bin/ls"])
    assert code == 0 and b"GLIBC" in expected  # the value below occurs in the bytes, or the test proves nothing
    result = devsy.run("exec", workspace, "--env", "V=GLIBC", "--", "cat", "/bin/ls",
                       extra_env={"DEVSY_REDACT": "GLIBC_2\nlibc.so"})
    assert result.returncode == 0, result.stderr
    assert hashlib.sha256(result.stdout).hexdigest() == hashlib.sha256(expected).hexdigest()
    err = devsy.run("exec", workspace, "--env", "V=GLIBC", "--", "sh", "-c", "cat /bin/ls >&2")
    assert hashlib.sha256(err.stderr).hexdigest() == hashlib.sha256(expected).hexdigest()
