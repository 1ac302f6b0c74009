"""devsy-provider-docker as one file: a reproducible executable zipapp that is a complete, conformant provider on a
CPython that has none of its libraries."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from devsy.agent.build import BuiltAgent, write_zipapp
from devsy.agent.provider_bundle import (
    PROVIDER_LOCK,
    PROVIDERS,
    build_provider,
    bundle_entries,
    content_key,
)
from devsy.agent.wheels import ensure_wheels
from devsy.runtime.host.testing import script

SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module")
def built() -> BuiltAgent:
    return build_provider("docker")


def test_bundle_is_one_reproducible_executable(built, tmp_path):
    data = built.path.read_bytes()
    assert data.startswith(b"#!/usr/bin/env python3\n") and os.access(built.path, os.X_OK)
    assert built.path.parent.name == built.key == content_key("docker", built.arch)
    assert built.sha256 == hashlib.sha256(data).hexdigest()
    with zipfile.ZipFile(built.path) as archive:
        names = archive.namelist()
    assert names[:2] == ["__main__.py", "devsy_agent_boot.py"] and "devsy/providers/docker.py" in names
    for tag in PROVIDER_LOCK.tags:
        assert any(n.startswith(f"wheels/{tag}/grpcio-") for n in names), tag
    again = tmp_path / "again.pyz"
    entries = bundle_entries(PROVIDERS["docker"], built.key, built.arch, ensure_wheels(built.arch, PROVIDER_LOCK))
    write_zipapp(again, entries)
    assert again.read_bytes() == data


def test_build_cli_prints_the_path_and_checksum_and_copies_with_out(built, tmp_path):
    out = tmp_path / "dist" / "provider.pyz"
    proc = subprocess.run([sys.executable, "-m", "devsy.agent.provider_bundle", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(out), built.sha256] and out.read_bytes() == built.path.read_bytes()


def test_bundle_is_a_conformant_provider_on_a_python_without_its_libraries(built, tmp_path, guest_image):
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info >= (3, 11)); import grpc"],
                           capture_output=True, text=True)
    if not probe.stdout.startswith("True") or probe.returncode == 0:
        pytest.skip(f"{SYSTEM_PYTHON} must be CPython >= 3.11 without grpc for this proof: {probe.stdout.strip()} "
                    f"{probe.stderr.strip()[-200:]}")
    # PATH decides which python3 the bundle's `#!/usr/bin/env python3` starts: the system one, not this venv's.
    # PYTHONDONTWRITEBYTECODE: imports write no bytecode, so compiled modules can only come from the unpack.
    env = {**os.environ, "PATH": "/usr/bin:/bin", "DEVSY_AGENT_CACHE": str(tmp_path / "unpacked"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([script("devsy-conformance"), "--image", guest_image, "--env", "NETWORK_MODE=host",
                           str(built.path)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " 0 failed" in proc.stdout.splitlines()[-1]
    assert Path(tmp_path / "unpacked" / built.key).is_dir(), "the bundle did not unpack its own libraries"
    # Started by every command, by whoever runs it: compiled once at the unpack (boot.py), not on each start.
    assert list((tmp_path / "unpacked" / built.key).glob("cp*/grpc/__pycache__/*.pyc"))
