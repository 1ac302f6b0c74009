from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy.errors import WorkspaceError
from devsy.workspace.content import clone_git, remove_content, remove_stale_partials


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The user's git config (url rewrites, credential helpers) and proxies must not change what these tests see.
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def bare_repo(tmp_path: Path) -> Path:
    work, bare = tmp_path / "work", tmp_path / "remote" / "proj.git"
    _git("init", "--bare", "-b", "main", str(bare))
    _git("init", "-b", "main", str(work))
    (work / "README.md").write_text("hello from the repo\n")
    _git("-C", str(work), "add", "README.md")
    _git("-C", str(work), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-m", "first")
    _git("-C", str(work), "push", str(bare), "main")
    return bare


@pytest.fixture
def silent_server() -> Iterator[socket.socket]:
    """A TCP port that accepts connections and never answers: a git server that hangs."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, timeout=60)


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []


def test_clone_local_bare_repository(tmp_path: Path, bare_repo: Path) -> None:
    dest = tmp_path / "ws" / "content"
    clone_git(f"file://{bare_repo}", dest, timeout=60)
    assert (dest / "README.md").read_text() == "hello from the repo\n"
    assert _leftovers(dest.parent) == ["content"]


def test_a_clone_has_the_mode_git_gives_a_checkout_not_a_private_one(tmp_path: Path, bare_repo: Path) -> None:
    dest = tmp_path / "ws" / "content"
    clone_git(f"file://{bare_repo}", dest, timeout=60)
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(dest.stat().st_mode) == 0o777 & ~umask  # 0755 under the usual 022: readable by the guest


def test_credentials_in_the_url_do_not_stay_in_the_clone(tmp_path: Path, bare_repo: Path) -> None:
    from fixtures.git_server import GitServer

    server = GitServer(bare_repo.parent).start()
    try:
        url = server.url(bare_repo.name).replace("http://", "http://alice:s3cret-token@")
        dest = tmp_path / "ws" / "content"
        clone_git(url, dest, timeout=60)
    finally:
        server.stop()
    assert (dest / "README.md").read_text() == "hello from the repo\n"
    config = (dest / ".git" / "config").read_text()
    assert "s3cret-token" not in config and "alice" not in config, config
    assert server.url(bare_repo.name) in config  # still the same origin, without the credentials


def test_clone_from_plain_path(tmp_path: Path, bare_repo: Path) -> None:
    dest = tmp_path / "ws" / "content"
    clone_git(str(bare_repo), dest, timeout=60)
    assert (dest / ".git").is_dir()


def test_failed_clone_leaves_no_partial_and_shows_git_stderr(tmp_path: Path) -> None:
    dest = tmp_path / "ws" / "content"
    with pytest.raises(WorkspaceError) as info:
        clone_git(f"file://{tmp_path}/does-not-exist.git", dest, timeout=60)
    assert "does-not-exist" in info.value.message and "exit 128" in info.value.message
    assert _leftovers(dest.parent) == []


def test_clone_errors_never_show_credentials(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as refusing:
        port = refusing.getsockname()[1]
    # The port is closed again: git's connection is refused quickly, and it echoes the URL it tried.
    dest = tmp_path / "ws" / "content"
    with pytest.raises(WorkspaceError) as info:
        clone_git(f"http://alice:s3cret-token@127.0.0.1:{port}/org/repo.git", dest, timeout=60)
    assert "s3cret-token" not in str(info.value) and "alice" not in str(info.value)
    assert f"127.0.0.1:{port}/org/repo.git" in info.value.message
    assert _leftovers(dest.parent) == []


def test_clone_that_hangs_times_out_and_leaves_no_partial(tmp_path: Path, silent_server: socket.socket) -> None:
    port = silent_server.getsockname()[1]
    dest = tmp_path / "ws" / "content"
    with pytest.raises(WorkspaceError, match="did not finish within 0.5s"):
        clone_git(f"http://127.0.0.1:{port}/repo.git", dest, timeout=0.5)
    assert _leftovers(dest.parent) == []


def test_ctrl_c_during_clone_removes_the_partial(tmp_path: Path, silent_server: socket.socket) -> None:
    port = silent_server.getsockname()[1]
    dest = tmp_path / "ws" / "content"
    script = (
        "import signal, sys; from pathlib import Path; from devsy.workspace.content import clone_git\n"
        # A shell that started this run in the background may have left SIGINT ignored, and Python then installs
        # no KeyboardInterrupt handler; make the child react to Ctrl-C as an interactive devsy would.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "clone_git(sys.argv[1], Path(sys.argv[2]), timeout=60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, f"http://127.0.0.1:{port}/repo.git", str(dest)], stderr=subprocess.PIPE
    )
    try:
        silent_server.settimeout(30)
        connection, _ = silent_server.accept()  # git is connected: the clone is in progress
        with connection:
            assert [p for p in _leftovers(dest.parent) if ".content.partial-" in p]
            child.send_signal(signal.SIGINT)
            _, stderr = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert b"KeyboardInterrupt" in stderr
    assert _leftovers(dest.parent) == []


def test_stale_partials_are_removed_so_a_retry_starts_clean(tmp_path: Path, bare_repo: Path) -> None:
    dest = tmp_path / "ws" / "content"
    stale = dest.parent / ".content.partial-abc123"
    (stale / ".git" / "objects").mkdir(parents=True)
    (stale / "half-written").write_text("x")
    neighbour = dest.parent / ".other.partial-zzz"
    neighbour.mkdir()
    assert remove_stale_partials(dest) == [stale]
    assert _leftovers(dest.parent) == [".other.partial-zzz"]
    clone_git(f"file://{bare_repo}", dest, timeout=60)
    assert (dest / "README.md").exists()
    assert remove_stale_partials(tmp_path / "nowhere" / "content") == []


def test_clone_refuses_existing_destination(tmp_path: Path, bare_repo: Path) -> None:
    dest = tmp_path / "content"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep")
    with pytest.raises(WorkspaceError, match="already exists"):
        clone_git(f"file://{bare_repo}", dest, timeout=60)
    assert (dest / "mine.txt").read_text() == "keep"


def test_remove_content_is_idempotent_and_never_follows_symlinks(tmp_path: Path, bare_repo: Path) -> None:
    dest = tmp_path / "content"
    clone_git(f"file://{bare_repo}", dest, timeout=60)
    remove_content(dest)
    assert not dest.exists()
    remove_content(dest)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "file").write_text("keep")
    dest.symlink_to(precious)
    remove_content(dest)
    assert not dest.is_symlink() and (precious / "file").read_text() == "keep"
