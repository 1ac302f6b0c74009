"""A changed owner is refused by `devsy up` whether or not the provider has a ReusePreflight of its own.

The fake runtime serves the same workspaces under two profiles: `default` advertises ReusePreflight (API 1.3),
`legacy` speaks API 1.1 and has none (as Go providers do). The host's own check must refuse either way, with the same
exit code, error kind and recreate guidance, and touch nothing; `--recreate` then replaces the instance.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import DevsyCli
from helpers.projects import make_project
from devsy.errors import RecreateRequired
from devsy.runtime.fake.modes import ENV_MODE, ENV_PROFILE, Mode, Profile

PROFILES = [Profile.DEFAULT.value, Profile.LEGACY.value]


def _fake_provider(state: Path, profile: str) -> list[str]:
    # no-agent-tools: the fake's guest cannot take the agent, so `devsy up` completes with its ssh warning.
    return ["--provider", "external:devsy-fake-runtime",
            "--provider-option", f"DEVSY_FAKE_STATE_DIR={state}",
            "--provider-option", f"{ENV_PROFILE}={profile}",
            "--provider-option", f"{ENV_MODE}={Mode.NO_AGENT_TOOLS.value}"]


def _snapshot(state: Path) -> dict[str, bytes]:
    """Every record the fake keeps (one JSON file per workspace): equal snapshots mean an untouched instance."""
    return {p.name: p.read_bytes() for p in sorted(state.iterdir())}


@pytest.mark.parametrize("profile", PROFILES)
def test_changed_remote_user_is_refused_then_recreated(devsy: DevsyCli, ws_id: str, tmp_path: Path,
                                                       guest_image: str, profile: str) -> None:
    state = tmp_path / "fake-state"
    project = make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "dev"})
    first = devsy.up(project, "--id", ws_id, *_fake_provider(state, profile)).json["workspace"]
    assert first["remote_user"] == "dev" and not first["reused"]
    again = devsy.up(project, "--id", ws_id).json["workspace"]  # the record keeps the provider and its options
    assert again["reused"] and again["instance"]["id"] == first["instance"]["id"]
    before = _snapshot(state)
    assert len(before) == 1

    make_project(project, {"image": guest_image, "remoteUser": "alt"})
    refused = devsy.up(project, "--id", ws_id, ok=False)
    assert refused.json["outcome"] == "error", f"the instance was reused for another owner: {refused.text}"
    error = refused.json["error"]
    assert (refused.returncode, error["type"]) == (RecreateRequired.exit_code, RecreateRequired.kind), refused.text
    assert "remote user 'dev' -> 'alt'" in error["message"] and "--recreate" in error["hint"]
    assert _snapshot(state) == before, "a refused reuse changed the instance"

    recreated = devsy.up(project, "--id", ws_id, "--recreate").json["workspace"]
    assert recreated["remote_user"] == "alt" and not recreated["reused"]
    assert recreated["instance"]["id"] != first["instance"]["id"]
    assert devsy.run("delete", ws_id, "--json").returncode == 0
    assert not list(state.iterdir()), "delete left the instance in the fake runtime"
