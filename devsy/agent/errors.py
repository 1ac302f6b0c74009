"""Typed errors of the agent layer."""

from __future__ import annotations

from devsy.errors import DevsyError


class AgentError(DevsyError):
    """Building, delivering or starting the in-guest agent failed."""

    kind = "agent"


class AgentBuildError(AgentError):
    """The agent bundle could not be built (usually: its wheels could not be downloaded)."""

    kind = "agent-build"


class AgentUnsupported(AgentError):
    """The guest cannot run the agent (no python3 >= 3.9, unknown architecture, no checksum tool)."""

    kind = "agent-unsupported"
