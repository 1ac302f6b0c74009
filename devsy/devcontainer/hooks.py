"""Running devcontainer lifecycle commands (onCreateCommand, postCreateCommand, postStartCommand) in the guest.

Their output is devsy's own output (progress), not a session: containerEnv and remoteEnv values are masked in it, live
and in the tail quoted by a failure (README.md, "Secrets").
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Callable, Collection
from typing import BinaryIO, cast

from devsy.devcontainer.config import DevContainerConfig
from devsy.devcontainer.lifecycle_commands import LifecycleCommand
from devsy.driver.base import Driver, ExecRequest
from devsy.errors import CommandFailed
from devsy.progress import Progress
from devsy.redaction import Redactor, configured_secrets, register_secrets

_TAIL_BYTES = 2048


class _Tee(io.RawIOBase):
    """Shows a command's output as progress while keeping its last bytes for the error message.

    The tail is kept already masked: cutting raw output to its last bytes could cut a secret in two and leave its
    end, which no later filter would recognise."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._redactor = Redactor(configured_secrets())
        self._tail: deque[bytes] = deque()
        self._size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._progress.raw(bytes(data))
        self._keep(self._redactor.feed(bytes(data)))
        return len(data)

    def _keep(self, data: bytes) -> None:
        if not data:
            return
        self._tail.append(data)
        self._size += len(data)
        while self._size - len(self._tail[0]) >= _TAIL_BYTES:
            self._size -= len(self._tail.popleft())

    def tail(self) -> str:
        self._keep(self._redactor.finish())
        return b"".join(self._tail)[-_TAIL_BYTES:].decode("utf-8", "replace")


def run_lifecycle_command(driver: Driver, workspace_id: str, command: LifecycleCommand | None, *, user: str,
                          workdir: str, env: dict[str, str], progress: Progress) -> None:
    if command is None:
        return
    register_secrets(env.values())
    for label, argv in command.argvs():
        tee = _Tee(progress)
        with progress.step(f"running {label}"):
            stream = cast(BinaryIO, tee)  # a RawIOBase has the write/flush the driver uses
            result = driver.exec(workspace_id, ExecRequest(argv=argv, stdout=stream, stderr=stream, user=user,
                                                           workdir=workdir, env=env))
        if result.exit_code != 0:
            raise CommandFailed(
                f"{label} failed with exit code {result.exit_code} in workspace {workspace_id}; "
                f"its output ended with:\n{tee.tail()}",
                hint=f"fix {command.name} in devcontainer.json, then run `devsy up {workspace_id}` again",
            )


CREATE_HOOKS = ("onCreateCommand", "postCreateCommand")


def run_create_hooks(driver: Driver, workspace_id: str, config: DevContainerConfig, *, user: str,
                     progress: Progress, done: Collection[str] = (),
                     on_done: Callable[[str], None] = lambda _name: None) -> None:
    """The once-per-instance commands (those not in `done`; `on_done(name)` after each succeeds, so a caller can
    record it before the next starts), then the per-start one."""
    for name, command in zip(CREATE_HOOKS, (config.on_create_command, config.post_create_command)):
        if name in done:
            continue
        run_lifecycle_command(driver, workspace_id, command, user=user, workdir=config.workspace_folder,
                              env=config.remote_env, progress=progress)
        on_done(name)
    run_start_hooks(driver, workspace_id, config, user=user, progress=progress)


def run_start_hooks(driver: Driver, workspace_id: str, config: DevContainerConfig, *, user: str,
                    progress: Progress) -> None:
    run_lifecycle_command(driver, workspace_id, config.post_start_command, user=user,
                          workdir=config.workspace_folder, env=config.remote_env, progress=progress)
