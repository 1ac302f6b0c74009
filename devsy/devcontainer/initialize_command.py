"""initializeCommand: on the host, in the local workspace folder, on every `devsy up`, before anything is created.

As in the reference CLI it runs with the host's environment (devsy passes it none of the devcontainer's), its stdin
is not the user's, and a failure stops `up` before any instance exists (the up's ledger removes what it made).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import BinaryIO

from devsy import process_tree
from devsy.devcontainer.hook_run import run_hook
from devsy.devcontainer.lifecycle_commands import LifecycleCommand
from devsy.driver.base import CancelToken
from devsy.progress import Progress

_STOP_GRACE_S = 5.0
_CANNOT_RUN = 127  # what a shell answers for a command it cannot find or run


def run_initialize_command(command: LifecycleCommand | None, folder: Path, workspace_id: str,
                           progress: Progress) -> None:
    if command is None:
        return

    def on_host(argv: list[str], stream: BinaryIO, cancel: CancelToken) -> int:
        try:
            # A process group of its own, so that a stop reaches what the entry started too (a grandchild would
            # survive and hold the output pipe open); no session of its own: the entry keeps the user's terminal.
            proc = subprocess.Popen(argv, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,  # noqa: S603
                                    stderr=subprocess.STDOUT, process_group=0)
        except OSError as exc:  # an array form names a program the host does not have
            stream.write(f"cannot run {argv[0]}: {exc.strerror}\n".encode())
            return _CANNOT_RUN
        # Interrupted, no entry may outlive the `up` that started it: Ctrl-C reaches only the main thread, which runs
        # an entry of the string or array form here, and run_hook cancels the entries of the object form.
        def stop() -> None:
            process_tree.stop_child(proc, group=True, grace=_STOP_GRACE_S)

        forget = cancel.on_cancel(stop)
        try:
            assert proc.stdout is not None
            with proc.stdout:
                for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
                    stream.write(chunk)
            code = proc.wait()
        except BaseException:
            stop()
            raise
        forget()
        return 128 - code if code < 0 else code  # Popen's -N for a signal: the shell's 128+N, as in the guest

    run_hook(command, on_host, progress, where=f"on the host in {folder}",
             hint=f"fix initializeCommand in devcontainer.json (it runs on this host in {folder}), then run "
             f"`devsy up` again (this up created and changed nothing for workspace {workspace_id})")
