"""workspace.json: what devsy remembers about a workspace between commands."""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from devsy.driver.provider_table import ARGS_OPTION, SERVE_ARG, row_for
from devsy.errors import CorruptRecord, UsageError, WorkspaceError
from devsy.workspace.ids import validate_workspace_id
from devsy.workspace.paths import WorkspacePaths, workspace_paths
from devsy.workspace.source import Source

log = logging.getLogger(__name__)

RECORD_VERSION = 1
_SOURCE_KINDS = ("local", "git", "image")
_STRING_FIELDS = ("id", "uid", "source_kind", "source_value", "provider", "created_at", "ssh_config")
_OPTIONAL_STRING_FIELDS = ("remote_user", "workspace_folder", "config_path", "create_hooks_attempt", "user_env_key")


def _takes_args_option(provider: str) -> bool:
    """Whether `provider`'s row takes its arguments from the ARGS option (external:EXECUTABLE)."""
    try:
        return row_for(provider).pattern
    except UsageError:
        return False


def _launch_args_as_recorded(provider: str, options: dict[str, str]) -> dict[str, str]:
    """The options of a record as read: a record written before devsy launched `external:EXECUTABLE` with exactly
    its ARGS option has none, and that devsy launched `EXECUTABLE serve` (PROTOCOL.md's former contract); such a
    workspace keeps that launch, so a provider that needs `serve` still serves it. Records written now always
    carry ARGS (to_dict), even empty."""
    if ARGS_OPTION in options or not _takes_args_option(provider):
        return options
    return {**options, ARGS_OPTION: SERVE_ARG}


def utc_now_rfc3339() -> str:
    """The current time as RFC 3339 UTC with a `Z` suffix, second precision."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass
class WorkspaceRecord:
    """One workspace as stored in workspace.json."""

    id: str
    uid: str  # fresh per creation: tells a recreated workspace apart from the one it replaced
    source_kind: str
    source_value: str
    provider: str
    provider_options: dict[str, str]
    created_at: str
    ssh_config: str  # the ssh config file holding this workspace's Host block
    remote_user: str = ""
    workspace_folder: str = ""
    config_path: str = ""
    # Which create hooks (hooks.CREATE_HOOKS names) completed on the instance made by create attempt
    # `create_hooks_attempt` (the instance's create-attempt label); each is saved as it succeeds. An instance whose
    # label names another attempt, or whose hooks are not all listed, did not finish them: `up` runs the rest.
    create_hooks_attempt: str = ""
    create_hooks_done: list[str] = field(default_factory=list)
    # userEnvProbe's result (devcontainer/user_env_probe.py): what the remote user's shell adds to the instance's
    # environment, for `user_env_key` (create attempt, remote user, probe mode); never a value devsy passes.
    user_env: dict[str, str] = field(default_factory=dict)
    user_env_key: str = ""
    # The Features the instance's image was built with: id -> digest (devcontainer/features), so a later up or start
    # finds their lifecycle commands in the fetch cache without asking a registry.
    feature_digests: dict[str, str] = field(default_factory=dict)

    @classmethod
    def new(
        cls, workspace_id: str, source: Source, provider: str, provider_options: dict[str, str], ssh_config: Path
    ) -> WorkspaceRecord:
        """A record for a workspace being created now, with a fresh uid."""
        return cls(
            id=validate_workspace_id(workspace_id),
            uid=uuid.uuid4().hex,
            source_kind=source.kind,
            source_value=source.recorded().value,
            provider=provider,
            provider_options=dict(provider_options),
            created_at=utc_now_rfc3339(),
            ssh_config=str(ssh_config),
        )

    @property
    def source(self) -> Source:
        return Source(self.source_kind, self.source_value)  # type: ignore[arg-type]  # checked in from_dict

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if _takes_args_option(self.provider):  # an absent ARGS means a record from before ARGS existed (from_dict)
            data["provider_options"].setdefault(ARGS_OPTION, "")
        return {"version": RECORD_VERSION, **data}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> WorkspaceRecord:
        """Build a record from parsed JSON; raises ValueError naming the first bad field."""
        if not isinstance(data, dict):
            raise ValueError("the top level is not a JSON object")
        version = data.get("version", RECORD_VERSION)
        if version != RECORD_VERSION:
            raise ValueError(f"record version {version!r} is not supported (this devsy reads {RECORD_VERSION})")
        for name in _STRING_FIELDS:
            if not isinstance(data.get(name), str) or not data[name]:
                raise ValueError(f"field {name!r} is missing or not a non-empty string")
        for name in _OPTIONAL_STRING_FIELDS:
            if not isinstance(data.get(name, ""), str):
                raise ValueError(f"field {name!r} is not a string")
        if data["source_kind"] not in _SOURCE_KINDS:
            raise ValueError(f"field 'source_kind' is {data['source_kind']!r}, expected one of {_SOURCE_KINDS}")
        done = data.get("create_hooks_done", [])
        if not isinstance(done, list) or not all(isinstance(name, str) for name in done):
            raise ValueError("field 'create_hooks_done' is not a list of strings")
        user_env = data.get("user_env", {})
        if not isinstance(user_env, dict) or not all(isinstance(v, str) for v in user_env.values()):
            raise ValueError("field 'user_env' is not an object of strings")
        digests = data.get("feature_digests", {})
        if not isinstance(digests, dict) or not all(isinstance(v, str) for v in digests.values()):
            raise ValueError("field 'feature_digests' is not an object of strings")
        options = data.get("provider_options", {})
        if not isinstance(options, dict) or not all(isinstance(v, str) for v in options.values()):
            raise ValueError("field 'provider_options' is not an object of strings")
        try:
            validate_workspace_id(data["id"])
        except UsageError as exc:
            raise ValueError(exc.message) from exc
        # Unknown keys (fields added later within the same version) are ignored, so older devsy still reads the record.
        return cls(
            id=data["id"],
            uid=data["uid"],
            source_kind=data["source_kind"],
            source_value=data["source_value"],
            provider=data["provider"],
            provider_options=_launch_args_as_recorded(data["provider"], dict(options)),
            created_at=data["created_at"],
            ssh_config=data["ssh_config"],
            remote_user=data.get("remote_user", ""),
            workspace_folder=data.get("workspace_folder", ""),
            config_path=data.get("config_path", ""),
            create_hooks_attempt=data.get("create_hooks_attempt", ""),
            create_hooks_done=list(done),
            user_env=dict(user_env),
            user_env_key=data.get("user_env_key", ""),
            feature_digests=dict(digests),
        )

    @classmethod
    def from_json(cls, text: str) -> WorkspaceRecord:
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class SalvagedRecord:
    """What can still be read from a corrupt record (each field "" if not): enough for `devsy delete` to find things."""

    provider: str = ""
    provider_options: dict[str, str] = field(default_factory=dict)
    uid: str = ""
    ssh_config: str = ""


def salvage_record(paths: WorkspacePaths) -> SalvagedRecord:
    """Read the fields of a corrupt record that still parse; never raises."""
    try:
        data = json.loads(paths.record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return SalvagedRecord()
    if not isinstance(data, dict):
        return SalvagedRecord()

    def text(name: str) -> str:
        value = data.get(name)
        return value if isinstance(value, str) else ""

    options = data.get("provider_options")
    if not isinstance(options, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in options.items()):
        options = {}
    return SalvagedRecord(text("provider"), _launch_args_as_recorded(text("provider"), dict(options)), text("uid"),
                          text("ssh_config"))


def load_record(paths: WorkspacePaths) -> WorkspaceRecord | None:
    """Read the record of a workspace; None if it has none. A corrupt record is a WorkspaceError."""
    try:
        text = paths.record.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise _corrupt(paths, f"it cannot be read ({exc})") from exc
    try:
        record = WorkspaceRecord.from_json(text)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise _corrupt(paths, str(exc)) from exc
    if record.id != paths.root.name:
        raise _corrupt(paths, f"it names workspace {record.id!r} but lives in the folder of {paths.root.name!r}")
    return record


def save_record(paths: WorkspacePaths, record: WorkspaceRecord) -> None:
    """Write the record atomically: readers see the old file or the new one, never a torn one."""
    try:
        paths.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=paths.root, prefix=".workspace.json.", suffix=".tmp")
    except OSError as exc:
        raise _unsaved(paths, exc) from exc
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            # Serializing straight into the temp file: a value that cannot be serialized fails here, mid-write,
            # and only the temp file is affected.
            json.dump(record.to_dict(), handle, indent=2, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, paths.record)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _unsaved(paths, exc) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(paths.root)


def delete_record(paths: WorkspacePaths) -> None:
    """Remove the record (and the workspace folder if nothing else is left in it); a missing record is fine."""
    try:
        paths.record.unlink(missing_ok=True)
        paths.root.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        # Content still in the folder is removed (or kept) by the caller; anything else is a real problem.
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise WorkspaceError(
                f"could not remove workspace record {paths.record}: {exc.strerror or exc}",
                f"check the permissions of {paths.root} (and that it is not on a read-only mount), then retry",
            ) from exc


def _unsaved(paths: WorkspacePaths, exc: OSError) -> WorkspaceError:
    return WorkspaceError(
        f"could not save workspace record {paths.record}: {exc.strerror or exc}",
        f"check free disk space and the permissions of {paths.root}, then retry",
    )


@dataclass
class RecordScan:
    """All records under a devsy home, and the errors of the ones that could not be read."""

    records: list[WorkspaceRecord] = field(default_factory=list)
    corrupt: list[WorkspaceError] = field(default_factory=list)


def scan_records(home: Path) -> RecordScan:
    """Read every workspace record under `home`, sorted by id; corrupt ones are reported, not raised."""
    scan = RecordScan()
    base = home / "workspaces"
    if not base.is_dir():
        return scan
    for entry in sorted(base.iterdir(), key=lambda p: p.name):
        try:
            workspace_id = validate_workspace_id(entry.name)
        except UsageError:
            continue  # not a folder devsy made (ids are validated before any folder is created)
        paths = workspace_paths(home, workspace_id)
        try:
            record = load_record(paths)
        except WorkspaceError as exc:
            scan.corrupt.append(exc)
            continue
        if record is not None:
            scan.records.append(record)
    return scan


def list_records(home: Path) -> list[WorkspaceRecord]:
    """Every readable workspace record under `home`, sorted by id; corrupt records are logged as warnings."""
    scan = scan_records(home)
    for error in scan.corrupt:
        log.warning("%s", error)
    return scan.records


def _corrupt(paths: WorkspacePaths, reason: str) -> CorruptRecord:
    return CorruptRecord(
        f"workspace record {paths.record} is corrupt: {reason}",
        f"fix or remove that file, or run `devsy delete {paths.root.name}` to remove the workspace",
    )


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; some filesystems do not support fsync on directories.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
