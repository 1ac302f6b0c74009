"""A first `devsy up` with no package index and no DEVSY_AGENT_BINARY: the agent is built from the wheels installed
with devsy (setup.py's build_agent_wheels), and the download cache is only a fallback that says so."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import zipfile
from pathlib import Path

import pytest

from helpers.cli import HOST_NET
from devsy.agent.build import build_agent, host_arch
from devsy.agent.errors import AgentBuildError
from devsy.agent.lock import DEFAULT_LOCK
from devsy.agent.wheels import PACKAGED_DIR, ensure_wheels, fill_package_data, packaged_wheels
from devsy.arch import SUPPORTED

# Discard port 9 on loopback refuses every connection, and PIP_NO_INDEX stops pip from trying any index at all;
# no pip config files (the machine's name local mirrors) and an empty find-links folder leave pip nothing to read.
_DEAD_INDEX = "http://127.0.0.1:9/simple"


def _offline_env(tmp_path: Path) -> dict[str, str]:
    no_links = tmp_path / "no-links"
    no_links.mkdir(exist_ok=True)
    return {"PIP_INDEX_URL": _DEAD_INDEX, "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull,
            "PIP_FIND_LINKS": str(no_links), "PIP_EXTRA_INDEX_URL": "", "DEVSY_AGENT_BINARY": ""}


@pytest.fixture(scope="module")
def installed() -> Path:
    """The installed set for this machine's architecture; its absence is a broken install, so it fails."""
    host = host_arch()
    found = packaged_wheels(host)
    assert found is not None, (f"devsy's package has no agent wheels in {PACKAGED_DIR / DEFAULT_LOCK.key() / host}: "
                               "install devsy with pip (`pip install -e .` runs setup.py's build_agent_wheels)")
    return found.root


def test_every_supported_architecture_is_installed(installed):
    for arch in SUPPORTED:
        found = packaged_wheels(arch)
        assert found is not None, arch
        assert len(found.per_tag) == len(DEFAULT_LOCK.pythons) and len(found.common) == len(DEFAULT_LOCK.common)


def test_build_reads_the_package_data_and_runs_no_pip(tmp_path, monkeypatch, installed):
    for name, value in _offline_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    cache = tmp_path / "cache"
    built = build_agent(root=cache)
    # A download would have left <cache>/wheels/<key>/ (its lock file at least) and, with this environment, failed.
    assert sorted(p.name for p in cache.iterdir()) == ["agent"], list(cache.rglob("*"))
    manifest = json.loads((installed / "manifest.json").read_text())
    with zipfile.ZipFile(built.path) as archive:
        bundled = {n.removeprefix("wheels/"): archive.read(n) for n in archive.namelist() if n.startswith("wheels/")}
    assert sorted(bundled) == sorted(manifest["sha256"])
    assert all(data == (installed / name).read_bytes() for name, data in bundled.items())


def test_damaged_package_data_is_refused_naming_the_wheel(tmp_path, installed):
    packaged = tmp_path / "packaged"
    shutil.copytree(installed, packaged / DEFAULT_LOCK.key() / installed.name)
    victim = next((packaged / DEFAULT_LOCK.key() / installed.name / "common").glob("paramiko-*.whl"))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte inside the archive changed
    victim.write_bytes(bytes(data))
    with pytest.raises(AgentBuildError) as caught:
        ensure_wheels(installed.name, packaged=packaged, root=tmp_path / "cache")
    assert f"common/{victim.name}" in caught.value.message and "reinstall devsy" in caught.value.hint
    assert not (tmp_path / "cache").exists(), "a damaged install fell back to a download"


def test_fill_reuses_a_verified_set_and_drops_other_lock_keys(tmp_path, monkeypatch, installed):
    for name, value in _offline_env(tmp_path).items():
        monkeypatch.setenv(name, value)  # a download here would fail: the sets can only be copied
    dest = tmp_path / "build" / "_wheels"
    (dest / "0000000000000000" / "amd64").mkdir(parents=True)
    written = fill_package_data(dest, reuse=PACKAGED_DIR, log=lambda _: None)
    assert sorted(p.name for p in dest.iterdir()) == [DEFAULT_LOCK.key()]
    assert all(packaged_wheels(arch, packaged=dest) is not None for arch in SUPPORTED)
    assert sorted(written) == sorted(p for p in dest.rglob("*") if p.is_file())
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in written)


def test_without_package_data_the_cache_download_says_so(tmp_path, capfd, installed):
    """The fallback (a source tree never installed): pip fetches the set into the cache, and a line says why."""
    cache = tmp_path / "cache"
    got = ensure_wheels(installed.name, packaged=tmp_path / "absent", root=cache)
    assert got.root == cache / "wheels" / DEFAULT_LOCK.key() / installed.name
    err = capfd.readouterr().err
    assert "not in devsy's installed package data" in err and "downloading them once with pip" in err, err
    assert all(got.path(n).read_bytes() == (installed / n).read_bytes() for n in got.common)


def test_first_up_with_no_package_index(tmp_path, devsy, guest_image, installed):
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    devsy.env.update({**_offline_env(tmp_path), "DEVSY_CACHE_DIR": str(cache)})
    workspace = f"t-offline-{secrets.token_hex(4)}"
    up = devsy.up(guest_image, "--id", workspace, *HOST_NET)  # the fixture removes its container if a step fails
    assert up.json["outcome"] == "success"
    assert "downloading them once with pip" not in up.stderr.decode()
    ssh = devsy.run("ssh", workspace, "--command", "echo ok")
    assert (ssh.returncode, ssh.stdout) == (0, b"ok\n"), ssh.text
    assert sorted(p.name for p in cache.iterdir()) == ["agent"], "devsy downloaded wheels into its cache"
    deleted = devsy.run("delete", workspace)
    assert deleted.returncode == 0, deleted.text
