"""initializeCommand: on the host, in the local workspace folder, on every `devsy up`, before anything is created.

As in the reference CLI it runs with the host's environment (devsy passes it none of the devcontainer's), its stdin
is not the user's, and a failure stops `up` before any instance exists (the up's ledger removes what it made).
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import BinaryIO

from devsy import process_tree
from devsy.devcontainer.hook_run import run_hook
from devsy.devcontainer.lifecycle_commands import LifecycleCommand
from devsy.progress import Progress

_STOP_GRACE_S = 5.0
_CANNOT_RUN = 127  # what a shell answers for a command it cannot find or run


def run_initialize_command(command: LifecycleCommand | None, folder: Path, workspace_id: str,
                           progress: Progress) -> None:
    if command is None:
        return
    running: set[subprocess.Popen] = set()
    lock = threading.Lock()

    def on_host(argv: list[str], stream: BinaryIO) -> int:
        try:
            proc = subprocess.Popen(argv, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,  # noqa: S603
                                    stderr=subprocess.STDOUT)
        except OSError as exc:  # an array form names a program the host does not have
            stream.write(f"cannot run {argv[0]}: {exc.strerror}\n".encode())
            return _CANNOT_RUN
        with lock:
            running.add(proc)
        assert proc.stdout is not None
        with proc.stdout:
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
                stream.write(chunk)
        return proc.wait()

    try:
        run_hook(command, on_host, progress, where=f"on the host in {folder}",
                 hint=f"fix initializeCommand in devcontainer.json (it runs on this host in {folder}), then run "
                 f"`devsy up` again (this up created and changed nothing for workspace {workspace_id})")
    except BaseException:
        # Interrupted (Ctrl-C reaches only this thread): no entry may outlive the `up` that started it.
        with lock:
            for proc in running:
                if proc.poll() is None:
                    process_tree.stop_child(proc, group=False, grace=_STOP_GRACE_S)
        raise
