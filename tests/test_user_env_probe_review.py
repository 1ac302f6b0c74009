"""userEnvProbe's result is the remote user's shell environment: a session as another user (`exec -u`,
`ssh --user`) must not get it (it carried the remote user's HOME and a PATH without sbin), and a remoteEnv null
removes a probed variable from `devsy ssh` sessions too (the guest agent set the probed value after the unset)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import HOST_NET, DevsyCli
from test_user_env_probe import _project

pytestmark = pytest.mark.docker

SHOW = 'printf "%s|%s|%s\\n" "$HOME" "${FROM_BASHRC-unset}" "${TOOL_HOME-unset}"'


def test_another_users_session_gets_no_probe_and_a_null_unsets_a_probed_variable(devsy: DevsyCli, ws_id: str,
                                                                                 guest_image: str,
                                                                                 tmp_path: Path) -> None:
    project = _project(tmp_path / "p", guest_image, {"remoteEnv": {"TOOL_HOME": None}})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    # The remote user's sessions: the probe's FROM_BASHRC, and TOOL_HOME removed by the null.
    for command in (("exec", ws_id, "--", "sh", "-c", SHOW), ("ssh", ws_id, "--command", SHOW)):
        result = devsy.run(*command)
        assert result.returncode == 0, result.text
        assert result.stdout == b"/home/dev|yes|unset\n", command[0]
    # root's sessions: root's own HOME, none of dev's startup files' variables.
    for command in (("exec", ws_id, "-u", "root", "--", "sh", "-c", SHOW),
                    ("ssh", ws_id, "--user", "root", "--command", SHOW)):
        result = devsy.run(*command)
        assert result.returncode == 0, result.text
        assert result.stdout == b"/root|unset|unset\n", command[0]
