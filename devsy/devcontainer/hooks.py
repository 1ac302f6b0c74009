"""Running the devcontainer lifecycle commands that run in the guest, in the spec's order, and `waitFor`.

onCreate, updateContent and postCreate run once per instance, postStart on each start, postAttach at the end of each
`devsy up` (an attach, as `devcontainer up` is for the reference CLI; like its `exec`, `devsy exec`/`devsy ssh`
sessions do not run it, so a session's command is never delayed by it). initializeCommand runs on the host:
devsy/devcontainer/initialize_command.py.

waitFor (default updateContentCommand): `run_up_hooks` runs the hooks up to it and hands back the later ones, which
`up` leaves to a background process once it has succeeded (background_hooks.py); `devsy up --wait-all-hooks` runs
every hook before it returns, as the reference CLI's `up` does.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from devsy.devcontainer.config import DevContainerConfig
from devsy.devcontainer.hook_run import run_hook
from devsy.devcontainer.lifecycle_commands import LIFECYCLE_HOOKS, LifecycleCommand
from devsy.driver.base import CancelToken, Driver, ExecRequest
from devsy.progress import Progress
from devsy.redaction import register_secrets

CREATE_HOOKS = ("onCreateCommand", "updateContentCommand", "postCreateCommand")


def run_lifecycle_command(driver: Driver, workspace_id: str, command: LifecycleCommand | None, *, user: str,
                          workdir: str, env: dict[str, str], progress: Progress) -> None:
    if command is None or not command.commands:
        return
    register_secrets(env.values())

    def in_guest(argv: list[str], stream, cancel: CancelToken) -> int:  # noqa: ANN001 - a BinaryIO
        return driver.exec(workspace_id, ExecRequest(argv=argv, stdout=stream, stderr=stream, user=user,
                                                     workdir=workdir, env=env, cancel=cancel)).exit_code

    run_hook(command, in_guest, progress, where=f"in workspace {workspace_id}",
             hint=f"fix {command.name} in devcontainer.json, then run `devsy up {workspace_id}` again")


def create_hooks_complete(done: Collection[str]) -> bool:
    """The create hooks run in order, so the last one done means all are (a record of an older devsy, written before
    updateContentCommand existed, lists only onCreate and postCreate)."""
    return CREATE_HOOKS[-1] in done


def _done(name: str, done: Collection[str]) -> bool:
    return any(later in done for later in CREATE_HOOKS[CREATE_HOOKS.index(name):])


def _guest_hooks(config: DevContainerConfig) -> dict[str, list[LifecycleCommand]]:
    """Each guest hook's commands: its Features' (install order), then the config's own, as the spec orders them."""
    own = {"onCreateCommand": config.on_create_command, "updateContentCommand": config.update_content_command,
           "postCreateCommand": config.post_create_command, "postStartCommand": config.post_start_command,
           "postAttachCommand": config.post_attach_command}
    return {name: [*config.feature_hooks.get(name, ()), *([command] if command is not None else [])]
            for name, command in own.items()}


def run_up_hooks(driver: Driver, workspace_id: str, config: DevContainerConfig, *, user: str, progress: Progress,
                 create: bool, start: bool, done: Collection[str] = (),
                 on_done: Callable[[str], None] = lambda _name: None,
                 wait_all: bool = False) -> list[LifecycleCommand]:
    """The guest hooks of one `devsy up`, in spec order: the create hooks not in `done` (when `create`; `on_done(name)`
    after each one's commands succeed, so a caller can record it before the next starts), postStart (when `start`),
    postAttach. Runs those up to waitFor (all of them with `wait_all`) and returns the rest, for the background,
    where a create hook is marked done after its last command (background_hooks.py)."""
    hooks = _guest_hooks(config)
    names = [name for name in CREATE_HOOKS if create and not _done(name, done)]
    names += ["postStartCommand"] * start + ["postAttachCommand"]
    wait_for = LIFECYCLE_HOOKS.index(config.wait_for)
    later: list[LifecycleCommand] = []
    for name in names:
        commands = hooks[name]
        if later or (not wait_all and LIFECYCLE_HOOKS.index(name) > wait_for):
            if commands:
                later.extend(commands)
            elif later and name in CREATE_HOOKS:
                # Nothing to run, but marked done only after the create hooks before it: its mark means all are.
                later.append(LifecycleCommand(name, ()))
            elif name in CREATE_HOOKS:
                on_done(name)
            continue
        for command in commands:
            run_lifecycle_command(driver, workspace_id, command, user=user, workdir=config.workspace_folder,
                                  env=config.remote_env, progress=progress)
        if name in CREATE_HOOKS:
            on_done(name)
    return later


def attach_hooks(config: DevContainerConfig) -> list[LifecycleCommand]:
    """postAttachCommand's commands (its Features' first), for an interactive session's attach."""
    return _guest_hooks(config)["postAttachCommand"]


def run_start_hooks(driver: Driver, workspace_id: str, config: DevContainerConfig, *, user: str,
                    progress: Progress) -> None:
    """`devsy start`: postStartCommand only (a start is not an attach), its Features' first."""
    for command in _guest_hooks(config)["postStartCommand"]:
        run_lifecycle_command(driver, workspace_id, command, user=user, workdir=config.workspace_folder,
                              env=config.remote_env, progress=progress)
