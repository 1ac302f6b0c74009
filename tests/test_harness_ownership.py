"""Owned names: stable, valid workspace ids carrying the run; SSH blocks removed only when owned."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import ssh_blocks
from harness.ownership import Ownership, RunIdError, check_run_id, is_owned_workspace

VALID = re.compile(r"^[a-z0-9-]{1,63}$")


def test_workspace_ids_are_valid_stable_distinct_and_owned_by_their_run() -> None:
    run, other = Ownership("a" * 32), Ownership("b" * 32)
    ids = {
        run.workspace_id("lifecycle/identity-change-refused", "external-microsandbox", suffix)
        for suffix in ("", "local", "image", "a-rather-long-suffix-that-does-not-fit-anywhere")
    }
    ids.add(run.workspace_id("failure-cleanup/first-up-failure", "builtin-docker"))
    assert len(ids) == 5
    for workspace_id in ids:
        assert VALID.match(workspace_id), workspace_id
        assert run.owns_workspace(workspace_id) and not other.owns_workspace(workspace_id)
        assert is_owned_workspace(workspace_id)
    fresh = run.workspace_id("lifecycle/up-fresh", "builtin-docker")
    assert fresh == run.workspace_id("lifecycle/up-fresh", "builtin-docker")
    assert fresh.startswith(run.workspace_prefix + "up-fresh-builtin")
    assert not is_owned_workspace("my-project") and not is_owned_workspace("hx12-not-a-run")


def test_run_ids_must_be_safe_directory_names() -> None:
    assert check_run_id("0123abcd_run.1") == "0123abcd_run.1"
    for bad in ("", "../x", "a/b", "x" * 65, "-leading"):
        with pytest.raises(RunIdError):
            check_run_id(bad)


def test_only_owned_ssh_blocks_are_removed(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "Host mine\n  User me\n"
        "# >>> devsy workspace hxaaaaaaaa-one-1 >>>\nHost hxaaaaaaaa-one-1.devsy\n  User dev\n"
        "# <<< devsy workspace hxaaaaaaaa-one-1 <<<\n"
        "# >>> devsy workspace user-project >>>\nHost user-project.devsy\n# <<< devsy workspace user-project <<<\n"
    )
    config.chmod(0o600)
    assert ssh_blocks.block_ids(config) == ["hxaaaaaaaa-one-1", "user-project"]
    assert ssh_blocks.remove_blocks(config, is_owned_workspace) == ["hxaaaaaaaa-one-1"]
    assert config.read_text() == (
        "Host mine\n  User me\n"
        "# >>> devsy workspace user-project >>>\nHost user-project.devsy\n# <<< devsy workspace user-project <<<\n"
    )
    assert config.stat().st_mode & 0o777 == 0o600
    assert ssh_blocks.remove_blocks(tmp_path / "missing", is_owned_workspace) == []
