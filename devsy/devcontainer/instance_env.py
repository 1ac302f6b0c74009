"""The environment an instance was started with, read through its driver: for ${containerEnv:...} and userEnvProbe."""

from __future__ import annotations

import io

from devsy.driver.base import Driver, ExecRequest
from devsy.errors import WorkspaceError

# The reference reads the container's configured env (`docker inspect`'s Config.Env); pid 1's initial environment
# is that, on every driver, with no engine API of its own.
_READ_ENV = ["cat", "/proc/1/environ"]


def read_instance_env(driver: Driver, workspace_id: str, purpose: str) -> dict[str, str]:
    """Pid 1's environment, read as root; `purpose` (what needs it) names the failure."""
    out, err = io.BytesIO(), io.BytesIO()
    result = driver.exec(workspace_id, ExecRequest(argv=list(_READ_ENV), stdout=out, stderr=err, user="root"))
    if result.exit_code != 0:
        raise WorkspaceError(
            f"cannot read the environment of workspace {workspace_id} for {purpose} "
            f"(`{' '.join(_READ_ENV)}` exited with {result.exit_code})",
            hint="the image needs `cat` and a /proc; or write the value in remoteEnv without ${containerEnv:...}",
        )
    env: dict[str, str] = {}
    for entry in out.getvalue().split(b"\0"):
        name, sep, value = entry.decode("utf-8", "surrogateescape").partition("=")
        if sep and name:
            env[name] = value
    return env
