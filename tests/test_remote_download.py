"""The remote agent's download cache and workspace copies, against the real fixture HTTP server: one download,
reuse with the cache gone and the URL 404, refusal of wrong bytes with nothing left, resume only if verified."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from devsy.agent.guest.download import (
    ChecksumMismatch,
    DownloadError,
    Policy,
    Source,
    fetch,
)
from devsy.agent.guest.runtime_install import (
    RequestError,
    ensure,
    remove_workspace,
    select,
    workspace_dir,
)
from fixtures.artifact_server import AccessRecord, ArtifactServer

PAYLOAD = os.urandom(3 * 1024 * 1024 + 17)  # several read chunks, odd length
SHA = hashlib.sha256(PAYLOAD).hexdigest()
WRONG = os.urandom(len(PAYLOAD))
FAST = Policy(attempts=3, timeout_s=5.0, backoff_s=0.01, max_backoff_s=0.02)
WS = "ws-1"


@pytest.fixture
def log() -> list[AccessRecord]:
    return []


@pytest.fixture
def server(log: list[AccessRecord]):
    with ArtifactServer({"/bin/tool": PAYLOAD, "/bin/wrong": WRONG}, access_log=log) as running:
        yield running


def source(server: ArtifactServer, route: str = "/bin/tool") -> Source:
    return Source(name="TOOL", url=server.url(route), sha256=SHA)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_fetch_downloads_once_then_serves_the_verified_cache(server, tmp_path):
    first, downloaded = fetch(source(server), str(tmp_path / "cache"), FAST)
    again, downloaded_again = fetch(source(server), str(tmp_path / "cache"), FAST)
    assert (first, downloaded, downloaded_again) == (again, True, False)
    assert Path(first).name == SHA and Path(first).read_bytes() == PAYLOAD
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o600  # never executed from the cache
    assert server.count("/bin/tool") == 1


def test_workspace_copy_is_used_without_cache_or_url(server, tmp_path):
    home = str(tmp_path / "home")
    (installed,) = ensure(home, WS, [source(server)], FAST)
    info = os.stat(installed.path)
    assert (installed.downloaded, installed.copied, stat.S_IMODE(info.st_mode)) == (True, True, 0o755)
    assert installed.path == os.path.join(workspace_dir(home, WS), "bin", "TOOL")

    for cached in (tmp_path / "home" / "downloads").iterdir():
        cached.unlink()  # only the private download cache goes
    server.set_offline("/bin/tool")
    (again,) = ensure(home, WS, [source(server)], FAST)

    assert (again.downloaded, again.copied) == (False, False)
    assert os.stat(again.path).st_ino == info.st_ino and Path(again.path).read_bytes() == PAYLOAD
    assert server.count("/bin/tool") == 1  # the 404 route was never asked


def test_an_altered_workspace_copy_is_replaced_from_the_cache(server, tmp_path):
    home = str(tmp_path / "home")
    (installed,) = ensure(home, WS, [source(server)], FAST)
    with open(installed.path, "r+b") as handle:
        handle.write(b"X")
    (again,) = ensure(home, WS, [source(server)], FAST)
    assert (again.downloaded, again.copied) == (False, True)
    assert Path(again.path).read_bytes() == PAYLOAD and server.count("/bin/tool") == 1


def test_wrong_bytes_are_refused_naming_both_digests_and_nothing_is_left(server, tmp_path):
    home = tmp_path / "home"
    with pytest.raises(ChecksumMismatch) as caught:
        ensure(str(home), WS, [source(server, "/bin/wrong")], FAST)
    actual = hashlib.sha256(WRONG).hexdigest()
    assert (caught.value.name, caught.value.expected, caught.value.actual) == ("TOOL", SHA, actual)
    assert "TOOL" in caught.value.message and SHA in caught.value.message and actual in caught.value.message
    assert files_under(home / "downloads") == [] and not (home / "workspaces").exists()
    assert server.count("/bin/wrong") == 1  # a complete wrong download is final, not retried


def test_a_verified_prefix_is_resumed_with_a_range_request(server, log, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / f"{SHA}.part").write_bytes(PAYLOAD[: len(PAYLOAD) // 2])
    path, downloaded = fetch(source(server), str(cache), FAST)
    assert downloaded and Path(path).read_bytes() == PAYLOAD
    assert [r.status for r in log if r.path == "/bin/tool"] == [206]
    assert files_under(cache) == [SHA, f"{SHA}.lock"]


def test_a_resumed_file_that_does_not_verify_is_fetched_again_from_zero(server, log, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / f"{SHA}.part").write_bytes(os.urandom(1000))  # not a prefix of the real file
    path, _ = fetch(source(server), str(cache), FAST)
    assert Path(path).read_bytes() == PAYLOAD
    assert [r.status for r in log if r.path == "/bin/tool"] == [206, 200]


def test_a_404_is_final_and_leaves_nothing(server, tmp_path):
    server.set_offline("/bin/tool")
    with pytest.raises(DownloadError) as caught:
        fetch(source(server), str(tmp_path / "cache"), FAST)
    assert not isinstance(caught.value, ChecksumMismatch) and "404" in caught.value.message
    assert server.count("/bin/tool") == 1
    assert files_under(tmp_path / "cache") == [f"{SHA}.lock"]


def test_an_unreachable_url_is_retried_a_bounded_number_of_times(tmp_path):
    unreachable = Source(name="TOOL", url="http://127.0.0.1:9/tool", sha256=SHA)  # nothing listens on port 9
    with pytest.raises(DownloadError, match="failed 3 times"):
        fetch(unreachable, str(tmp_path / "cache"), FAST)


def test_an_altered_cache_file_is_never_handed_out(server, tmp_path):
    cache = tmp_path / "cache"
    path, _ = fetch(source(server), str(cache), FAST)
    Path(path).write_bytes(WRONG)
    again, downloaded = fetch(source(server), str(cache), FAST)
    assert downloaded and Path(again).read_bytes() == PAYLOAD and server.count("/bin/tool") == 2


def test_select_names_what_the_config_lacks_for_this_platform():
    declared = {"TOOL": [{"os": "linux", "arch": "arm64", "url": "http://x/t", "sha256": SHA}]}
    with pytest.raises(RequestError, match="no TOOL for linux/amd64 .*declares: linux/arm64"):
        select(declared, "linux", "amd64")
    assert [s.url for s in select(declared, "linux", "arm64")] == ["http://x/t"]


def test_remove_workspace_removes_its_folder_and_lock(server, tmp_path):
    home = tmp_path / "home"
    ensure(str(home), WS, [source(server)], FAST)
    assert remove_workspace(str(home), WS) is True
    assert not (home / "workspaces" / WS).exists() and not (home / "locks" / f"{WS}.lock").exists()
    assert remove_workspace(str(home), WS) is False
