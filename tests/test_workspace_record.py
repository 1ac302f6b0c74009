from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest

from devsy.errors import WorkspaceError
from devsy.workspace.paths import devsy_home, ssh_config_path, workspace_paths
from devsy.workspace.record import (
    WorkspaceRecord,
    delete_record,
    list_records,
    load_record,
    save_record,
    scan_records,
)
from devsy.workspace.source import Source


def _record(workspace_id: str = "proj", **changes: object) -> WorkspaceRecord:
    record = WorkspaceRecord.new(
        workspace_id, Source("local", "/src/proj"), "docker", {"image": "ubuntu"}, Path("/home/me/.ssh/config")
    )
    for key, value in changes.items():
        setattr(record, key, value)
    return record


def test_paths_layout_and_env_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = workspace_paths(tmp_path, "proj")
    assert paths.record == tmp_path / "workspaces" / "proj" / "workspace.json"
    assert paths.content == tmp_path / "workspaces" / "proj" / "content"
    assert paths.lock == tmp_path / "locks" / "proj.lock"
    assert paths.lock_holder.parent == paths.lock.parent and paths.lock_holder != paths.lock
    monkeypatch.setenv("DEVSY_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("DEVSY_SSH_CONFIG", str(tmp_path / "cfg"))
    assert devsy_home() == tmp_path / "h" and ssh_config_path() == tmp_path / "cfg"
    monkeypatch.delenv("DEVSY_HOME")
    monkeypatch.delenv("DEVSY_SSH_CONFIG")
    assert devsy_home() == Path.home() / ".devsy" and ssh_config_path() == Path.home() / ".ssh" / "config"


def test_new_records_get_fresh_uids_and_utc_timestamps() -> None:
    first, second = _record(), _record()
    assert first.uid != second.uid and len(first.uid) == 32
    assert first.created_at.endswith("Z")
    assert datetime.fromisoformat(first.created_at.replace("Z", "+00:00")).utcoffset().total_seconds() == 0


def test_save_then_load_round_trips(tmp_path: Path) -> None:
    paths = workspace_paths(tmp_path, "proj")
    record = _record(remote_user="vscode", workspace_folder="/workspaces/proj", config_path="/src/proj/.devcontainer.json")
    save_record(paths, record)
    assert load_record(paths) == record
    assert WorkspaceRecord.from_json(record.to_json()) == record
    assert paths.record.stat().st_mode & 0o777 == 0o600


def test_missing_record_loads_as_none(tmp_path: Path) -> None:
    assert load_record(workspace_paths(tmp_path, "nothing")) is None


def test_failed_save_mid_write_leaves_old_record_intact_and_no_temp_files(tmp_path: Path) -> None:
    paths = workspace_paths(tmp_path, "proj")
    save_record(paths, _record(provider="docker"))
    before = paths.record.read_bytes()
    # json.dump streams into the temp file; the unserializable value fails after part of it was written.
    broken = _record(provider="msb", provider_options={"a": "b", "z": object()})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        save_record(paths, broken)
    assert paths.record.read_bytes() == before
    assert sorted(p.name for p in paths.root.iterdir()) == ["workspace.json"]


def test_failed_replace_leaves_old_record_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = workspace_paths(tmp_path, "proj")
    save_record(paths, _record(provider="docker"))
    before = paths.record.read_bytes()

    def no_space(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_space)
    with pytest.raises(WorkspaceError, match="No space left") as info:
        save_record(paths, _record(provider="msb"))
    assert "disk space" in info.value.hint
    monkeypatch.undo()
    assert paths.record.read_bytes() == before
    assert sorted(p.name for p in paths.root.iterdir()) == ["workspace.json"]


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[]",
        json.dumps({"id": "proj"}),
        json.dumps({**_record().to_dict(), "source_kind": "ftp"}),
        json.dumps({**_record().to_dict(), "provider_options": {"a": 1}}),
        json.dumps({**_record().to_dict(), "version": 99}),
        json.dumps({**_record().to_dict(), "id": "other"}),
    ],
)
def test_corrupt_record_is_a_workspace_error_pointing_to_delete(tmp_path: Path, content: str) -> None:
    paths = workspace_paths(tmp_path, "proj")
    paths.root.mkdir(parents=True)
    paths.record.write_text(content)
    with pytest.raises(WorkspaceError) as info:
        load_record(paths)
    assert str(paths.record) in info.value.message and "corrupt" in info.value.message
    assert "devsy delete proj" in info.value.hint


def test_delete_is_idempotent_and_keeps_remaining_content(tmp_path: Path) -> None:
    paths = workspace_paths(tmp_path, "proj")
    save_record(paths, _record())
    delete_record(paths)
    assert not paths.record.exists() and not paths.root.exists()
    delete_record(paths)
    save_record(paths, _record())
    paths.content.mkdir()
    delete_record(paths)
    assert not paths.record.exists() and paths.content.is_dir()


def test_list_records_sorted_and_corrupt_ones_flagged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for workspace_id in ("zeta", "alpha", "mid"):
        save_record(workspace_paths(tmp_path, workspace_id), _record(workspace_id))
    broken = workspace_paths(tmp_path, "broken")
    broken.root.mkdir(parents=True)
    broken.record.write_text("{")
    (tmp_path / "workspaces" / "Not-An-Id").mkdir()
    (tmp_path / "workspaces" / "empty").mkdir()
    assert [r.id for r in list_records(tmp_path)] == ["alpha", "mid", "zeta"]
    assert any(str(broken.record) in message for message in caplog.messages)
    scan = scan_records(tmp_path)
    assert [r.id for r in scan.records] == ["alpha", "mid", "zeta"]
    assert len(scan.corrupt) == 1 and str(broken.record) in scan.corrupt[0].message
    assert list_records(tmp_path / "nowhere") == []


def test_a_git_url_s_credentials_never_reach_the_record_file(tmp_path: Path) -> None:
    url = "https://alice:s3cret-token@git.example/org/repo.git"
    record = WorkspaceRecord.new("repo", Source("git", url), "docker", {}, tmp_path / "ssh_config")
    paths = workspace_paths(tmp_path, "repo")
    save_record(paths, record)
    assert "s3cret-token" not in paths.record.read_text() and "alice" not in paths.record.read_text()
    # The same repository named again with its credentials is the same workspace, not "another source".
    assert load_record(paths).source == Source("git", url).recorded()
