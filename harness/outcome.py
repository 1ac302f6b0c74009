"""The `--json` outcome of a devsy command, parsed into typed views (devcontainers/cli style)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from devsy.errors import DevsyError, error_class
from harness.commands import CommandRecord


class OutcomeError(AssertionError):
    """A devsy command's JSON outcome is missing, malformed, or not the expected one."""


@dataclass(frozen=True)
class InstanceView:
    id: str
    created_at: str
    status: str


@dataclass(frozen=True)
class WorkspaceView:
    id: str
    uid: str
    provider: str
    source: str  # the source value (folder, git URL or image reference)
    source_kind: str  # local | git | image
    status: str
    instance: InstanceView | None
    ssh_host: str
    remote_user: str
    workspace_folder: str
    content_dir: str | None
    reused: bool


@dataclass(frozen=True)
class ErrorView:
    type: str  # the error's kind (devsy.errors registry)
    message: str
    hint: str

    def is_a(self, *classes: type[DevsyError]) -> bool:
        """True when the class that declares this error's kind is (a subclass of) one of `classes`."""
        declared = error_class(self.type)
        return declared is not None and issubclass(declared, classes)


@dataclass(frozen=True)
class Outcome:
    outcome: str
    command: str
    exit_code: int | None
    record: CommandRecord
    workspace: WorkspaceView | None = None
    workspace_id: str | None = None
    error: ErrorView | None = None
    listed: tuple[str, ...] = ()  # workspace ids of `devsy list`

    @property
    def ok(self) -> bool:
        return self.outcome == "success" and self.exit_code == 0

    def expect_success(self) -> "Outcome":
        """Return self when the command succeeded, else fail with the command, its error and output tails."""
        if not self.ok:
            raise OutcomeError(f"expected success from devsy {self.command}, got {self._describe()}")
        return self

    def expect_error(self, error_type: str) -> ErrorView:
        """Return the error when the command failed with `error_type` and a non-zero exit, else fail."""
        if self.outcome != "error" or self.error is None or self.error.type != error_type or self.exit_code == 0:
            raise OutcomeError(f"expected devsy {self.command} to fail with {error_type!r}, got {self._describe()}")
        return self.error

    def ws(self) -> WorkspaceView:
        """The workspace object of a successful outcome."""
        self.expect_success()
        if self.workspace is None:
            raise OutcomeError(f"devsy {self.command} succeeded without a workspace object: {self.record.stdout_tail}")
        return self.workspace

    def _describe(self) -> str:
        error = f" {self.error.type}: {self.error.message} (hint: {self.error.hint})" if self.error else ""
        return (
            f"outcome={self.outcome!r} exit={self.exit_code}{error}\n{self.record.summary()}\n"
            f"stderr tail:\n{self.record.stderr_tail}"
        )


def parse_outcome(stdout: bytes, exit_code: int | None, record: CommandRecord) -> Outcome:
    """Parse the single JSON object a `--json` command prints on stdout."""
    text = stdout.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OutcomeError(
            f"devsy printed no single JSON object on stdout ({exc.msg}); {record.summary()}\n"
            f"stdout tail:\n{record.stdout_tail}\nstderr tail:\n{record.stderr_tail}"
        ) from None
    if not isinstance(data, dict) or "outcome" not in data:
        raise OutcomeError(f"devsy's JSON outcome has no 'outcome' field: {text[:500]}")
    return Outcome(
        outcome=str(data["outcome"]),
        command=str(data.get("command", "")),
        exit_code=exit_code,
        record=record,
        workspace=_workspace(data.get("workspace")),
        workspace_id=data.get("workspace_id"),
        listed=tuple(str(w.get("id", "")) for w in data.get("workspaces") or [] if isinstance(w, dict)),
        error=_error(data.get("error")),
    )


def error_of(stdout: bytes) -> ErrorView | None:
    """The error of a `--json` error outcome on `stdout`; None for a success, or for output that is no outcome."""
    try:
        data = json.loads(stdout.decode("utf-8", "replace").strip())
    except json.JSONDecodeError:
        return None
    error = data.get("error") if isinstance(data, dict) and data.get("outcome") == "error" else None
    return _error(error)


def _error(raw: Any) -> ErrorView | None:
    if not isinstance(raw, dict):
        return None
    return ErrorView(str(raw.get("type", "")), str(raw.get("message", "")), str(raw.get("hint", "")))


def _workspace(raw: Any) -> WorkspaceView | None:
    if not isinstance(raw, dict):
        return None
    instance = raw.get("instance")
    source = raw.get("source")
    if isinstance(source, dict):
        source_value, source_kind = str(source.get("value", "")), str(source.get("kind", ""))
    else:
        source_value, source_kind = str(source or ""), ""
    return WorkspaceView(
        id=str(raw.get("id", "")),
        uid=str(raw.get("uid", "")),
        provider=str(raw.get("provider", "")),
        source=source_value,
        source_kind=source_kind,
        status=str(raw.get("status", "")),
        instance=_instance(instance),
        ssh_host=str(raw.get("ssh_host", "")),
        remote_user=str(raw.get("remote_user", "")),
        workspace_folder=str(raw.get("workspace_folder", "")),
        content_dir=raw.get("content_dir"),
        reused=bool(raw.get("reused", False)),
    )


def _instance(raw: Any) -> InstanceView | None:
    if not isinstance(raw, dict):
        return None
    return InstanceView(str(raw.get("id", "")), str(raw.get("created_at", "")), str(raw.get("status", "")))
