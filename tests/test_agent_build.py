"""The agent bundle: cached by content key, reproducible, and runnable by every CPython >= 3.9 found here."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from devsy.agent import build as build_module
from devsy.agent.build import build_agent, content_key
from devsy.agent.lock import DEFAULT_LOCK
from devsy.agent.wheels import ensure_wheels


@pytest.fixture(scope="module")
def built():
    return build_agent()


def test_build_is_cached_by_content_key(built):
    again = build_agent(built.arch)
    assert again == built
    assert built.path.parent.name == built.key == content_key(built.arch)
    assert built.path.name == f"devsy-agent-{built.arch}.pyz"


def test_key_changes_when_a_guest_source_changes(monkeypatch, built):
    original = build_module.guest_sources()
    changed = [(name, data + b"\n# changed\n" if name.endswith("server.py") else data) for name, data in original]
    monkeypatch.setattr(build_module, "guest_sources", lambda: changed)
    assert content_key(built.arch) != built.key


def test_same_inputs_give_the_same_bytes(tmp_path, built):
    wheels = ensure_wheels(built.arch, DEFAULT_LOCK)
    first, second = tmp_path / "a.pyz", tmp_path / "b.pyz"
    build_module._write_agent(first, built.key, built.arch, wheels)
    build_module._write_agent(second, built.key, built.arch, wheels)
    assert first.read_bytes() == second.read_bytes() == built.path.read_bytes()


def test_bundle_is_one_executable_zipapp(built):
    data = built.path.read_bytes()
    assert data.startswith(b"#!/usr/bin/env python3\n")
    assert os.access(built.path, os.X_OK)
    with zipfile.ZipFile(built.path) as archive:
        names = archive.namelist()
    assert "__main__.py" in names and "devsy_agent_boot.py" in names and "devsy_agent/server.py" in names
    for tag in DEFAULT_LOCK.tags:
        assert any(n.startswith(f"wheels/{tag}/cffi-") for n in names), tag
    assert any(n.startswith("wheels/common/paramiko-") for n in names)


def test_build_cli_prints_the_path_and_copies_with_out(tmp_path, built):
    out = tmp_path / "dist" / "agent.pyz"
    proc = subprocess.run([sys.executable, "-m", "devsy.agent.build", "--out", str(out)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out) and out.read_bytes() == built.path.read_bytes()
    plain = subprocess.run([sys.executable, "-m", "devsy.agent.build"], capture_output=True, text=True, timeout=600)
    assert plain.stdout.strip() == str(built.path)


def _interpreters() -> list[tuple[str, str | None]]:
    """(minor version, path or None) for 3.9..3.13: pyenv's, then PATH's python3.X."""
    found = []
    for minor in ("3.9", "3.10", "3.11", "3.12", "3.13"):
        candidates = sorted(glob.glob(f"/root/.pyenv/versions/{minor}.*/bin/python{minor}"))
        candidates += [p for p in (f"/usr/bin/python{minor}", f"/usr/local/bin/python{minor}") if os.path.exists(p)]
        found.append((minor, candidates[0] if candidates else None))
    return found


@pytest.mark.parametrize(("minor", "python"), _interpreters(), ids=[m for m, _ in _interpreters()])
def test_agent_runs_on_each_supported_python(tmp_path, built, minor, python):
    if python is None:
        pytest.skip(f"no CPython {minor} on this machine (looked in /root/.pyenv/versions and /usr/[local/]bin)")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DEVSY_AGENT_CACHE": str(tmp_path / "cache")}
    reports, imported = [], []
    for _ in range(2):  # the first creates the host key (through paramiko); the second reads the key file
        proc = subprocess.run([python, "-E", "-S", "-X", "importtime", str(built.path), "setup"], capture_output=True,
                              text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        reports.append(json.loads(proc.stdout))
        imported.append(set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", proc.stderr, re.MULTILINE)))
    report = reports[0]
    assert report["python"] == "cp" + minor.replace(".", "")
    assert report["host_key"].startswith("ssh-ed25519 ")
    assert Path(report["site"]).is_dir() and Path(report["site"]).parent.parent == tmp_path / "cache"
    # The same key, read without paramiko (or cryptography) once it exists (hostkey.public_line).
    assert reports[1]["host_key"] == report["host_key"]
    assert "paramiko" in imported[0] and not {"paramiko", "cryptography"} & imported[1]
    # Compiled as imported (boot.py), not all at the unpack: pycparser, which nothing imports, stays uncompiled.
    site = Path(report["site"])
    assert list((site / "paramiko").glob("__pycache__/*.pyc")) and not list(site.glob("pycparser/**/*.pyc"))


def test_too_old_python_gets_a_clear_message(tmp_path, built):
    old = sorted(glob.glob("/root/.pyenv/versions/3.8.*/bin/python3.8"))
    if not old:
        pytest.skip("no CPython 3.8 on this machine (looked in /root/.pyenv/versions)")
    proc = subprocess.run([old[0], str(built.path), "version"], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "DEVSY_AGENT_CACHE": str(tmp_path)})
    assert proc.returncode == 3 and "needs CPython >= 3.9" in proc.stderr


def test_concurrent_first_runs_unpack_once_and_safely(tmp_path, built):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DEVSY_AGENT_CACHE": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-E", "-S", str(built.path), "version"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    sites = {json.loads(out)["site"] for out, _ in outputs}
    assert len(sites) == 1
    build_dir = Path(sites.pop()).parent
    assert sorted(p.name for p in build_dir.iterdir()) == [f"cp{sys.version_info[0]}{sys.version_info[1]}"]
