"""The managed content folder: git clones devsy makes for `git:` sources, and their cleanup."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from devsy import process_tree
from devsy.errors import WorkspaceError
from devsy.redaction import redact_url

_STDERR_TAIL_LINES = 20


def partial_prefix(dest: Path) -> str:
    """Name prefix of the in-progress clone folders of `dest` (siblings, so the final rename is atomic)."""
    return f".{dest.name}.partial-"


def clone_git(url: str, dest: Path, *, timeout: float) -> None:
    """Clone `url` into `dest` with the real git; on failure or interruption nothing of this attempt remains."""
    shown = redact_url(url)
    if not timeout > 0:
        raise ValueError(f"clone timeout must be positive, got {timeout!r}")
    if dest.exists() or dest.is_symlink():
        raise WorkspaceError(
            f"cannot clone {shown}: the content folder {dest} already exists",
            "remove the workspace with `devsy delete` (or pass another `--id`) and retry",
        )
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=dest.parent, prefix=partial_prefix(dest)))
    try:
        _run_clone(url, partial, timeout=timeout)
        _forget_credentials(url, partial, timeout=timeout)
        # git cloned into mkdtemp's private folder: give the checkout the mode a plain `git clone` would (umask),
        # or a non-root developer in the guest could not even read the workspace.
        os.chmod(partial, 0o777 & ~_umask())
        os.rename(partial, dest)
    except BaseException as exc:
        error: BaseException = exc
        if isinstance(exc, OSError):
            error = WorkspaceError(
                f"cannot clone {shown} into {dest}: {exc.strerror or exc}",
                f"check the permissions and free space of {dest.parent}, then retry",
            )
        problem = _remove_tree(partial)
        if problem:
            error.add_note(f"could not remove the partial clone {partial}: {problem}")
        if error is exc:
            raise
        raise error from exc


def remove_stale_partials(dest: Path) -> list[Path]:
    """Remove in-progress clone folders left by a killed attempt; call only while holding the workspace lock."""
    if not dest.parent.is_dir():
        return []
    prefix = partial_prefix(dest)
    removed = []
    for entry in sorted(dest.parent.iterdir()):
        if entry.name.startswith(prefix):
            _remove_path(entry)
            removed.append(entry)
    return removed


def remove_content(dest: Path) -> None:
    """Remove the content folder; a missing folder is fine. A symlink is unlinked, never followed."""
    _remove_path(dest)


def _run_clone(url: str, target: Path, *, timeout: float) -> None:
    shown = redact_url(url)
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GCM_INTERACTIVE="never")
    if "GIT_SSH_COMMAND" not in env and "GIT_SSH" not in env:
        # An ssh password or host-key prompt would hang until the timeout; fail fast instead.
        env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"
    argv = ["git", "clone", "--quiet", "--", url, str(target)]
    try:
        # Own session: on timeout or Ctrl-C we kill git and its helpers (remote-https, ssh) as one group.
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise WorkspaceError(f"cannot clone {shown}: `git` is not installed", "install git and retry") from exc
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        stderr = _kill_group(proc)
        raise WorkspaceError(
            f"cloning {shown} did not finish within {timeout:g}s{_tail(stderr)}",
            "check that the repository is reachable from this machine, or raise the clone timeout",
        ) from exc
    except BaseException:
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        raise WorkspaceError(
            f"git clone of {shown} failed (exit {proc.returncode}){_tail(stderr)}",
            "check the URL and your access to the repository (git runs without prompting for credentials)",
        )


def _forget_credentials(url: str, clone: Path, *, timeout: float) -> None:
    """Credentials given in the URL are for the clone only: the checkout (mounted into the guest) must not keep
    them in .git/config, so its origin becomes the URL without them."""
    shown = redact_url(url)
    if shown == url:
        return
    try:
        done = subprocess.run(["git", "-C", str(clone), "remote", "set-url", "origin", shown],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=min(timeout, 60))
    except subprocess.TimeoutExpired as exc:
        raise WorkspaceError(f"could not remove the credentials from the clone of {shown} (git timed out)",
                             "retry; the partial clone was removed") from exc
    if done.returncode != 0:
        raise WorkspaceError(f"could not remove the credentials from the clone of {shown}{_tail(done.stderr)}",
                             "retry; the partial clone was removed")


def _umask() -> int:
    """This process's umask, read without changing it (os.umask can only set it, racing other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _kill_group(proc: subprocess.Popen[bytes]) -> bytes:
    # KILL at once (a clone holds nothing to clean up); the bound guards against an unkillable (D-state) git.
    return process_tree.stop_child_collecting(proc, grace=0, kill_wait=10).stderr


def _tail(stderr: bytes | None) -> str:
    lines = (stderr or b"").decode("utf-8", "replace").strip().splitlines()[-_STDERR_TAIL_LINES:]
    return (":\n" + redact_url("\n".join(lines))) if lines else ""


def _remove_tree(path: Path) -> str | None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return str(exc)
    return None


def _remove_path(path: Path) -> None:
    try:
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            path.unlink(missing_ok=True)
            return
    except OSError as exc:
        raise WorkspaceError(f"could not remove {path}: {exc}", "check its permissions and remove it by hand") from exc
    problem = _remove_tree(path)
    if problem:
        raise WorkspaceError(f"could not remove {path}: {problem}", "check its permissions and remove it by hand")
