"""The one machine-readable outcome object `--json` prints on stdout, and the human text otherwise."""

from __future__ import annotations

import json
import sys
from typing import Any

from devsy.driver.base import ContainerDetails
from devsy.errors import DevsyError
from devsy.workspace.record import WorkspaceRecord
from devsy.workspace.sshconfig import host_alias


def instance_json(instance: ContainerDetails | None) -> dict[str, Any] | None:
    if instance is None:
        return None
    return {"id": instance.id, "created_at": instance.created_at, "status": instance.status.value}


def workspace_json(record: WorkspaceRecord, instance: ContainerDetails | None, content_dir: str | None,
                   **extra: Any) -> dict[str, Any]:
    return {
        "id": record.id,
        "uid": record.uid,
        "provider": record.provider,
        # A git URL may carry credentials; report the kind, and the value only for folders and images.
        "source": {"kind": record.source_kind,
                   "value": record.source_value if record.source_kind != "git" else ""},
        "status": instance.status.value if instance else "absent",
        "instance": instance_json(instance),
        "ssh_host": host_alias(record.id),
        "remote_user": record.remote_user,
        "workspace_folder": record.workspace_folder,
        "content_dir": content_dir,
        **extra,
    }


def emit_success(command: str, as_json: bool, payload: dict[str, Any], human: str) -> int:
    if as_json:
        print(json.dumps({"outcome": "success", "command": command, **payload}), flush=True)
    elif human:
        print(human, flush=True)
    return 0


def emit_error(command: str, as_json: bool, error: DevsyError, warnings: list[str] | None = None) -> int:
    """`warnings`: what the command warned about before it failed (`up`: the same list a success reports)."""
    if as_json:
        # `type` is the error's kind, unique per class (the registry in devsy.errors): scripts classify by it.
        body = {"type": error.kind, "message": error.message, "hint": error.hint}
        extra = {"warnings": warnings} if warnings else {}
        print(json.dumps({"outcome": "error", "command": command, "error": body, **extra}), flush=True)
    print(f"devsy {command}: error: {error.message}", file=sys.stderr)
    if error.hint:
        print(f"  hint: {error.hint}", file=sys.stderr)
    return error.exit_code
