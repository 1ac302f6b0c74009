"""userEnvProbe: what the remote user's login/interactive shell adds to the environment, for hooks and sessions.

As the reference CLI does (injectHeadless.ts `probeUserEnv`): the user's own shell from /etc/passwd runs
`cat /proc/self/environ` (or `printenv`) between two marks with -lic / -lc / -ic, PWD is dropped, and the
container's PATH entries the shell's PATH lacks are merged in (sbin ones only for root). A probe that takes longer
than 10 s or fails is reported and the session goes on without it, as in the reference.

Probed once per instance and remote user, like the reference's cache in its container session data folder: the
result is what the shell sets *beyond* the instance's own environment (so containerEnv values are never copied),
kept in the workspace record, and every `devsy exec`/`ssh` session gets it without a round trip. A probed value that
holds a value devsy passes as environment (a secret) is used by this `up`'s hooks but never stored.
"""

from __future__ import annotations

import dataclasses
import io
import re
import secrets
import threading
from collections.abc import Collection
from dataclasses import dataclass

from devsy.devcontainer.config import DevContainerConfig
from devsy.devcontainer.instance_env import read_instance_env
from devsy.driver.base import Driver, ExecRequest
from devsy.errors import WorkspaceError
from devsy.progress import Progress
from devsy.redaction import configured_secrets, redact_text, register_secrets
from devsy.workspace.record import WorkspaceRecord

_SHELL_FLAGS = {"loginInteractiveShell": "-lic", "loginShell": "-lc", "interactiveShell": "-ic"}  # besides "none"
_PROBE_TIMEOUT_S = 10.0  # the reference's: a startup script that waits for input must not hold `up`
# The user's login shell, run with the mode's flags on the script in $1 (a shell the image lacks: /bin/sh).
_RUN_IN_USER_SHELL = ('shell=$(getent passwd "$(id -un)" 2>/dev/null | cut -d: -f7); '
                      '[ -x "$shell" ] || shell=/bin/sh; exec "$shell" "$0" "$1"')
# The probing shell's own state, not an environment for others (the reference drops PWD; `_` and SHLVL are the
# probe's command and depth).
_PER_PROCESS = ("PWD", "OLDPWD", "_", "SHLVL")
_READERS = (("cat /proc/self/environ", "\0"), ("printenv", "\n"))


@dataclass(frozen=True)
class ProbedEnv:
    values: dict[str, str]  # what the shell sets beyond the instance's environment
    stored: dict[str, str]  # the part the record may keep (no value devsy passes as environment)


def stored_user_env(record: WorkspaceRecord, mode: str, user: str = "") -> dict[str, str]:
    """What a session as `user` (default: the remote user) adds for userEnvProbe: the record's probe when it was made
    for the recorded remote user and this mode (`up` probes each new instance; a session makes no round trip for it).
    Another user's session gets none: the probe is the remote user's shell (its HOME, its PATH without sbin)."""
    if mode == "none" or user not in ("", record.remote_user) \
            or record.user_env_key.split(":")[1:] != [record.remote_user, mode]:
        return {}
    return dict(record.user_env)


def with_user_env(config: DevContainerConfig, user_env: dict[str, str]) -> DevContainerConfig:
    """`config` whose hooks get `user_env` under remoteEnv (remoteEnv's own values win, as in sessions)."""
    return dataclasses.replace(config, remote_env={**user_env, **config.remote_env})


def probe_key(create_attempt: str, user: str, mode: str) -> str:
    """What a stored probe is valid for: one instance (its create attempt), one remote user, one mode."""
    return f"{create_attempt}:{user}:{mode}"


def ensure_user_env(driver: Driver, record: WorkspaceRecord, *, create_attempt: str, user: str, mode: str,
                    progress: Progress, passed_names: Collection[str] = ()) -> dict[str, str]:
    """The probed additions for this instance and user, probing when the record holds none for them; the record
    (saved by the caller) is updated with what may be stored. `passed_names`: the containerEnv names devsy passes
    (see probe_user_env)."""
    key = probe_key(create_attempt, user, mode)
    if record.user_env_key == key:
        return dict(record.user_env)
    probed = probe_user_env(driver, record.id, user=user, mode=mode, progress=progress, passed_names=passed_names)
    record.user_env, record.user_env_key = dict(probed.stored), key
    return probed.values


def probe_user_env(driver: Driver, workspace_id: str, *, user: str, mode: str, progress: Progress,
                   passed_names: Collection[str] = ()) -> ProbedEnv:
    """`passed_names`: containerEnv names whose values in the instance are secrets too, even when the config now
    passes others (a reused instance keeps the values of the up that created it): nothing built from them is
    stored, and devsy masks them."""
    if mode == "none":
        return ProbedEnv({}, {})
    with progress.step(f"probing the environment of {user}'s shell (userEnvProbe {mode})"):
        shell_env = _run_probe(driver, workspace_id, user, _SHELL_FLAGS[mode], progress)
        if not shell_env:
            return ProbedEnv({}, {})
        try:
            instance = read_instance_env(driver, workspace_id, "userEnvProbe")
        except WorkspaceError as exc:
            progress.warn(f"userEnvProbe is not applied: {exc.message}")
            return ProbedEnv({}, {})
    for name in _PER_PROCESS:
        shell_env.pop(name, None)
    if "PATH" in shell_env and "PATH" in instance:
        shell_env["PATH"] = merge_paths(shell_env["PATH"], instance["PATH"], root=user in ("root", "0"))
    added = {name: value for name, value in shell_env.items() if instance.get(name) != value}
    instance_secrets = [instance[name] for name in passed_names if name in instance]
    register_secrets(instance_secrets)
    secret_values = configured_secrets(instance_secrets)
    return ProbedEnv(added, {name: value for name, value in added.items()
                             if redact_text(value, secret_values) == value})


def merge_paths(shell_path: str, container_path: str, *, root: bool) -> str:
    """The shell's PATH with the container's entries it lacks put in after the entry preceding them (the
    reference's mergePaths); sbin entries only for root."""
    result = shell_path.split(":")
    insert_at = 0
    for entry in container_path.split(":"):
        if entry in result:
            insert_at = result.index(entry) + 1
        elif root or not re.search(r"/sbin(/|$)", entry):
            result.insert(insert_at, entry)
            insert_at += 1
    return ":".join(result)


def _run_probe(driver: Driver, workspace_id: str, user: str, flags: str, progress: Progress) -> dict[str, str]:
    for reader, separator in _READERS:
        mark = secrets.token_hex(16)
        script = f"printf %s {mark}; {reader}; printf %s {mark}"
        out = io.BytesIO()
        request = ExecRequest(argv=["/bin/sh", "-c", _RUN_IN_USER_SHELL, flags, script], stdout=out,
                              stderr=io.BytesIO(), user=user)
        timer = threading.Timer(_PROBE_TIMEOUT_S, request.cancel.cancel)  # the cancel kills the shell's tree
        timer.start()
        try:
            driver.exec(workspace_id, request)
        finally:
            timer.cancel()
        if request.cancel.is_cancelled():
            progress.warn(f"userEnvProbe took longer than {_PROBE_TIMEOUT_S:g}s and was stopped: hooks and sessions "
                          "run without the shell's environment (avoid waiting for input in the shell's startup files)")
            return {}
        found = re.search(re.escape(mark).encode() + b"(.*)" + re.escape(mark).encode(), out.getvalue(), re.DOTALL)
        if found and found.group(1):
            return _parse(found.group(1).decode("utf-8", "surrogateescape"), separator)
    progress.warn(f"userEnvProbe found no environment in {user}'s shell: hooks and sessions run without it")
    return {}


def _parse(text: str, separator: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in text.split(separator):
        name, sep, value = entry.partition("=")
        if sep and name:
            env[name] = value
    return env
