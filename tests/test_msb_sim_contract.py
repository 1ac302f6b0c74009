"""The msb simulator (fixtures/msb_sim, a stand-in) against the real msb 0.7.11, wherever msb can be observed here.

The same argv runs against the real msb (its own MSB_HOME; MSB_LIBKRUNFW_PATH at a file that is not the library, so
a created sandbox exists but never boots) and against `devsy-msb-sim` (its own MSB_HOME), and the two must agree on
exit status, stderr texts, stdout, and the JSON schema (keys, value types, status values) of every JSON answer. The
one divergence allowed is the boot: the real `create` fails to boot (exit 1) where the stand-in's container runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures.msb_sim.docker import sweep, untag_images
from fixtures.msb_sim.sandboxes import STATUSES
from fixtures.msb_sim.state import home_key
from helpers.msb import NOT_A_LIBRARY, REAL_MSB

SIM = str(Path(sys.executable).with_name("devsy-msb-sim"))
TIMEOUT_S = 120


@dataclass(frozen=True)
class Answer:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@dataclass
class Msb:
    """One msb (real or stand-in) with a private MSB_HOME."""

    binary: str
    home: Path
    extra_env: dict[str, str]

    def __call__(self, *args: str, stdin: bytes | None = None) -> Answer:
        env = {**os.environ, "MSB_HOME": str(self.home), **self.extra_env}
        if "MSB_LIBKRUNFW_PATH" not in self.extra_env:
            env.pop("MSB_LIBKRUNFW_PATH", None)
        done = subprocess.run([self.binary, *args], env=env, input=stdin if stdin is not None else b"",
                              capture_output=True, timeout=TIMEOUT_S)
        return Answer(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Msb, Msb]]:
    """(real msb, stand-in), each with its own short MSB_HOME (msb's socket paths must stay under 108 bytes)."""
    fake = tmp_path / "libkrunfw-not.so"
    fake.write_bytes(NOT_A_LIBRARY)
    real = Msb(REAL_MSB, Path(tempfile.mkdtemp(prefix="msbc-", dir="/tmp")), {"MSB_LIBKRUNFW_PATH": str(fake)})
    sim = Msb(SIM, Path(tempfile.mkdtemp(prefix="msbs-", dir="/tmp")), {})
    yield real, sim
    for msb in (real, sim):
        listed = msb("ls", "--format", "json")
        for entry in json.loads(listed.stdout) if listed.code == 0 else []:
            msb("rm", "--force", entry["name"])
        for entry in json.loads(msb("volume", "ls", "--format", "json").stdout or "[]"):
            msb("volume", "rm", entry["name"])
    if shutil.which("docker"):
        key = home_key(sim.home)
        assert sweep(key) == [], "the stand-in left containers or volumes behind"
        untag_images(key)
    for msb in (real, sim):
        shutil.rmtree(msb.home, ignore_errors=True)


def schema(value: Any) -> Any:
    """Keys and value types (lists by the schema of their first element; null is a type of its own)."""
    if isinstance(value, dict):
        return {key: schema(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return [schema(value[0])] if value else []
    return type(value).__name__


def same(real: Answer, sim: Answer, *, stdout: bool = True) -> None:
    assert (sim.code, sim.stderr) == (real.code, real.stderr), f"real: {real}\nsim: {sim}"
    if stdout:
        assert sim.stdout == real.stdout


# -- no Docker needed: errors and flag parsing ------------------------------------------------------------------
ERRORS = [
    ("inspect", "nope", "--format", "json"), ("inspect", "nope"), ("rm", "nope"), ("rm", "-f", "nope"),
    ("remove", "nope"), ("stop", "nope"), ("stop", "-t", "5", "nope"), ("stop", "--force", "nope"),
    ("start", "nope"), ("logs", "nope"), ("logs", "nope", "--source", "system", "--no-color", "--tail", "200"),
    ("exec", "nope", "--stream", "--", "true"), ("modify", "nope", "--cpus", "2", "--format", "json"),
    ("volume", "rm", "nope"), ("volume", "create"), ("volume", "create", "bad/name"),
    ("image", "inspect", "nope:1", "--format", "json"), ("image", "inspect", "nope", "--format", "json"),
    ("create", "--bogus", "x"), ("inspect",), ("create", "--name", "bad name", "--pull", "never", "/"),
    ("create", "--name", "sbx", "--pull", "never", "nosuchimage:1"),
    ("ls", "--format", "json"), ("volume", "ls", "--format", "json"), ("image", "ls", "--format", "json"),
]


@pytest.mark.parametrize("args", ERRORS, ids=[" ".join(a) for a in ERRORS])
def test_errors_and_empty_listings_match_msb(pair: tuple[Msb, Msb], args: tuple[str, ...]) -> None:
    real, sim = pair
    same(real(*args), sim(*args))


def test_version_has_msbs_shape_and_says_stand_in(pair: tuple[Msb, Msb]) -> None:
    real, sim = pair
    shape = re.compile(r"msb (\d+\.\d+\.\d+)")
    real_v, sim_v = real("--version"), sim("--version")
    assert (real_v.code, sim_v.code) == (0, 0)
    assert shape.match(sim_v.stdout).group(1) == shape.match(real_v.stdout).group(1)
    assert "stand-in" in sim_v.stdout and "stand-in" not in real_v.stdout


# -- Docker needed: the stand-in's objects are containers and volumes ---------------------------------------------
@pytest.mark.docker
def test_volume_lifecycle_matches_msb(pair: tuple[Msb, Msb]) -> None:
    real, sim = pair
    for args in (("volume", "create", "v1"), ("volume", "create", "v1"), ("volume", "create", "--name", "v2")):
        same(real(*args), sim(*args))
    listed_real, listed_sim = real("volume", "ls", "--format", "json"), sim("volume", "ls", "--format", "json")
    assert [v["name"] for v in listed_sim.json()] == [v["name"] for v in listed_real.json()]  # order included
    assert sorted(v["name"] for v in listed_real.json()) == ["v1", "v2"]
    assert schema(listed_sim.json()) == schema(listed_real.json())
    for args in (("volume", "rm", "v1"), ("volume", "rm", "v1"), ("volume", "rm", "v2")):
        same(real(*args), sim(*args))


def _create_argv(name: str, image: str, folder: Path, file: Path, *extra: str) -> tuple[str, ...]:
    """A sandbox as devsy's driver creates it (spec.argv flags), with every mount kind."""
    return ("create", "--name", name, "--pull", "never", "--user", "root", "--memory", "1024", "--cpus", "1",
            "--max-memory", "2048", "--max-cpus", "2", "--idle-timeout", "300s", "--net-default-egress", "deny",
            "--label", "dev.devsy.managed=true", "--label", "dev.devsy.workspace=ws1", "--env", "A=b",
            "--env", "EMPTY=", "--tmpfs", "/scratch:64M", "--mount-named", "v1:/data",
            "--mount-dir", f"{folder}:/workspaces/p:rw,stat-virt=strict,host-perms=private,uid=1000,gid=1000",
            "--mount-file", f"{file}:/etc/extra:ro", "--mount-owned", "/owned",
            "--entrypoint", "/bin/sh", *extra, image)


def _compare_created(real: Msb, sim: Msb, name: str) -> None:
    got_real, got_sim = real("inspect", name, "--format", "json"), sim("inspect", name, "--format", "json")
    assert (got_real.code, got_sim.code) == (0, 0), (got_real, got_sim)
    r, s = got_real.json(), got_sim.json()
    assert r["status"] in STATUSES and s["status"] in STATUSES
    for key in sorted(set(r["config"]) | set(s["config"])):  # one key at a time: a readable difference
        if key == "manifest_digest":  # msb's digest of the manifest it converted; the stand-in's is its own
            assert (s["config"][key] is None) == (r["config"][key] is None)
            continue
        assert s["config"].get(key) == r["config"].get(key), f"config.{key} differs from msb's"
    assert {k: schema(v) for k, v in s.items() if k != "active_config"} == \
        {k: schema(v) for k, v in r.items() if k != "active_config"}
    for record in (r, s):  # the running VM's config, when there is one, is a config
        assert record["active_config"] is None or schema(record["active_config"]) == schema(record["config"])
    listed_real, listed_sim = real("ls", "--format", "json").json(), sim("ls", "--format", "json").json()
    assert schema(listed_sim) == schema(listed_real)
    assert [(e["name"], e["image"]) for e in listed_sim] == [(e["name"], e["image"]) for e in listed_real]


@pytest.mark.docker
def test_created_sandbox_inspects_like_msb(pair: tuple[Msb, Msb], busybox_rootfs: Path, tmp_path: Path) -> None:
    real, sim = pair
    folder, file = tmp_path / "p", tmp_path / "extra"
    folder.mkdir()
    file.write_text("x\n")
    for msb in pair:
        assert msb("volume", "create", "v1").code == 0
    argv = _create_argv("sb1", str(busybox_rootfs), folder, file)
    assert sim(*argv).code == 0
    assert real(*argv).code == 1  # created, then the VM cannot be built (MSB_LIBKRUNFW_PATH is not the library)
    _compare_created(real, sim, "sb1")
    same(real(*argv), sim(*argv))  # a second create of the name
    for bad in (("--mount-dir", "/nonexistent-msb-sim:/x"), ("--mount-dir", f"{folder}:/x:rw,uid=1000"),
                ("--cpus", "2", "--max-cpus", "1"), ("--memory", "512M", "--max-memory", "256M")):
        args = ("create", "--name", "sb2", "--pull", "never", *bad, str(busybox_rootfs))
        same(real(*args), sim(*args))
    same(real("ls", "-q"), sim("ls", "-q"))


@pytest.fixture(scope="session")
def tiny_image(busybox_rootfs: Path) -> str:
    """A small Docker image (the busybox rootfs with CMD, ENV, WORKDIR) to load: its id."""
    tag = "msb-sim-contract:busybox"
    known = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", tag], capture_output=True, text=True,
                           timeout=TIMEOUT_S)
    if known.returncode == 0:  # imported by an earlier run: a new import would only add another id
        return known.stdout.strip()
    with subprocess.Popen(["tar", "-C", str(busybox_rootfs), "-c", "."], stdout=subprocess.PIPE) as tar:
        subprocess.run(["docker", "import", "-c", 'CMD ["/bin/sh"]', "-c", "ENV FOO=bar", "-c", "WORKDIR /root",
                        "-", tag], stdin=tar.stdout, check=True, capture_output=True, timeout=TIMEOUT_S)
    return subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", tag], capture_output=True, text=True,
                          check=True, timeout=TIMEOUT_S).stdout.strip()


@pytest.mark.docker
def test_load_and_image_inspect_match_msb(pair: tuple[Msb, Msb], tiny_image: str, tmp_path: Path) -> None:
    real, sim = pair
    archive = subprocess.run(["docker", "save", tiny_image], capture_output=True, check=True,
                             timeout=TIMEOUT_S).stdout
    ref = f"devsy-image:sha256-{tiny_image.removeprefix('sha256:')}"
    same(real("load", "--tag", ref, stdin=archive), sim("load", "--tag", ref, stdin=archive))
    same(real("load", stdin=b"not an archive"), sim("load", stdin=b"not an archive"))
    r, s = real("image", "inspect", ref, "--format", "json").json(), sim("image", "inspect", ref, "--format", "json")
    assert s.code == 0, s
    assert schema(s.json()) == schema(r)
    assert s.json()["config"] == r["config"]  # digest = the Docker image id, cmd/env/workdir from the image
    assert schema(sim("image", "ls", "--format", "json").json()) == schema(real("image", "ls", "--format",
                                                                                "json").json())
    folder, file = tmp_path / "p", tmp_path / "extra"
    folder.mkdir()
    file.write_text("x\n")
    for msb in pair:
        assert msb("volume", "create", "v1").code == 0
    argv = _create_argv("sb-oci", ref, folder, file, "--root-disk", "2G")
    assert sim(*argv).code == 0
    assert real(*argv).code == 1
    _compare_created(real, sim, "sb-oci")
