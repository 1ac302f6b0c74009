"""Running one lifecycle hook's entries, one after another or (the object form) in parallel, wherever they run.

Where an entry runs (the guest, the host) is the caller's `RunOne`; this module owns what the spec says about the
forms: a string or array is one entry, an object's entries run at the same time, each line of their output is
prefixed with the entry's name, and a failure names every failed entry with its output's tail. The output is devsy's
own output (progress), so it is masked live and in the quoted tail (README.md, "Secrets").
"""

from __future__ import annotations

import io
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, cast

from devsy.devcontainer.lifecycle_commands import LifecycleCommand
from devsy.driver.base import CancelToken
from devsy.errors import CommandFailed
from devsy.progress import Progress
from devsy.redaction import Redactor, configured_secrets

_TAIL_BYTES = 2048

# Runs one argv with its stdout and stderr written to the stream; returns the exit code. Once the token is cancelled
# (the hook was interrupted) the command must be stopped and the call return.
RunOne = Callable[[list[str], BinaryIO, CancelToken], int]


class _Tee(io.RawIOBase):
    """Shows a command's output as progress while keeping its last bytes for the error message; with a `prefix`,
    whole lines only, each starting with it (entries running in parallel interleave by line, never mid-line).

    The tail is kept already masked: cutting raw output to its last bytes could cut a secret in two and leave its
    end, which no later filter would recognise."""

    def __init__(self, progress: Progress, prefix: bytes = b"") -> None:
        self._progress = progress
        self._prefix = prefix
        self._partial = b""
        self._redactor = Redactor(configured_secrets())
        self._tail: deque[bytes] = deque()
        self._size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        data = bytes(data)
        self._show(data)
        self._keep(self._redactor.feed(data))
        return len(data)

    def _show(self, data: bytes) -> None:
        if not self._prefix:
            self._progress.raw(data)
            return
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if lines:
            self._progress.raw(b"".join(self._prefix + line + b"\n" for line in lines))

    def end(self) -> None:
        """The command ended: show a last unterminated line."""
        if self._partial:
            self._progress.raw(self._prefix + self._partial + b"\n")
            self._partial = b""

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


@dataclass
class _Ended:
    label: str
    exit_code: int
    tail: str


def run_hook(command: LifecycleCommand, run_one: RunOne, progress: Progress, *, where: str, hint: str) -> None:
    """Run every entry of `command` (its object form in parallel); CommandFailed naming each entry that failed."""
    entries = command.argvs()
    cancel = CancelToken()
    try:
        if command.parallel and len(entries) > 1:
            names = ", ".join(label for label, _ in entries)
            with progress.step(f"running {names} in parallel"):  # a failure raises inside: the step says "failed"
                _raise_failed(_in_parallel(entries, run_one, progress, cancel), where, hint)
        else:
            for label, argv in entries:
                with progress.step(f"running {label}"):
                    _raise_failed([_run_entry(label, argv, run_one, _Tee(progress), cancel)], where, hint)
    except BaseException:
        cancel.cancel()  # interrupted (Ctrl-C reaches only this thread): no entry may outlive the hook
        raise


def _raise_failed(ended: list[_Ended], where: str, hint: str) -> None:
    """CommandFailed naming each entry of `ended` that failed, with its output's tail."""
    failed = [entry for entry in ended if entry.exit_code != 0]
    if failed:
        raise CommandFailed(
            "; ".join(f"{e.label} failed with exit code {e.exit_code} {where}; its output ended with:\n{e.tail}"
                      for e in failed),
            hint=hint,
        )


def _run_entry(label: str, argv: list[str], run_one: RunOne, tee: _Tee, cancel: CancelToken) -> _Ended:
    lock = threading.Lock()  # the driver may write stdout and stderr from two threads

    class _Locked(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data: bytes) -> int:  # type: ignore[override]
            with lock:
                return tee.write(data)

    code = run_one(argv, cast(BinaryIO, _Locked()), cancel)  # a RawIOBase has the write/flush a runner uses
    tee.end()
    return _Ended(label, code, tee.tail())


def _in_parallel(entries: list[tuple[str, list[str]]], run_one: RunOne, progress: Progress,
                 cancel: CancelToken) -> list[_Ended]:
    """All entries at once; every one is waited for (a failure does not cut the others short, as in the reference
    CLI), then the first exception, if any, is raised. Interrupted, every entry is stopped before the pool's exit
    waits for its thread (else that wait lasts as long as the longest entry)."""
    with ThreadPoolExecutor(max_workers=len(entries), thread_name_prefix="devsy-hook") as pool:
        futures = [pool.submit(_run_entry, label, argv, run_one, _Tee(progress, f"[{label}] ".encode()), cancel)
                   for label, argv in entries]
        try:
            errors = [f.exception() for f in futures]
        except BaseException:
            cancel.cancel()
            raise
    for error in errors:
        if error is not None:
            raise error
    return [f.result() for f in futures]
