"""The agent note, `<workspace dir>/agent.json` (devsy's own folder, removed with the workspace): where `devsy up`
put the agent in the guest, so `devsy ssh` starts it without building, hashing or checking anything first; or that
the guest cannot run it. Kept apart from install.py so the SSH fast path can read it without importing the driver.
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from devsy.workspace.fsdirs import write_atomic
from devsy.workspace.paths import WorkspacePaths

NOTE_NAME = "agent.json"


class Sessions(str, enum.Enum):
    """How a workspace's SSH sessions are served (`devsy status` says which; the value is what --json prints)."""

    AGENT = "agent"  # by the agent in the guest
    EXEC = "exec"  # where the guest cannot run it: by devsy on the host, each session a driver exec (exec_sessions.py)


@dataclass(frozen=True)
class AgentNote:
    guest_path: str
    sha256: str
    python: str = ""
    sessions: Sessions = Sessions.AGENT
    why: str = ""  # for exec sessions: why the agent cannot run in the guest
    terminal: str = ""  # for exec sessions: what gives them a pty in the guest (exec_terminal.py; "" = none)
    # What lets a reused `up` skip checking the agent in the guest (host_view.py): the architecture it was built for,
    # the instance it was set up in, and how the files it runs from looked then (empty: check in the guest).
    arch: str = ""
    instance: str = ""
    stamps: dict[str, str] = field(default_factory=dict)

    @property
    def exec_sessions(self) -> bool:
        return self.sessions is Sessions.EXEC


def note_path(paths: WorkspacePaths) -> Path:
    return paths.root / NOTE_NAME


def read_note(paths: WorkspacePaths) -> AgentNote | None:
    try:
        data = json.loads(note_path(paths).read_text())
        return AgentNote(guest_path=str(data["guest_path"]), sha256=str(data["sha256"]),
                         python=str(data.get("python", "")),
                         sessions=_sessions(data.get("sessions")),
                         why=str(data.get("why", "")), terminal=str(data.get("terminal", "")),
                         arch=str(data.get("arch", "")), instance=str(data.get("instance", "")),
                         stamps=_stamps(data.get("stamps")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # never written, or unreadable: the agent is simply delivered again


def _stamps(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _sessions(value: object) -> Sessions:
    try:
        return Sessions(value)
    except ValueError:
        return Sessions.AGENT  # a note from before the field (or a value this version does not know)


def write_note(paths: WorkspacePaths, note: AgentNote) -> None:
    paths.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(note_path(paths), json.dumps({**asdict(note), "sessions": note.sessions.value}, sort_keys=True))
