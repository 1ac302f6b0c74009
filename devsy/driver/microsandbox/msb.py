"""Running `msb` commands: bounded, cancellable, in their own process group, output captured, failures typed.

Output goes to temporary files, not pipes: a VMM that msb starts may inherit msb's stdout/stderr and outlive it, and
a pipe would then keep a reader waiting until the VM stops. Only the exact texts MICROSANDBOX.md lists are given a
meaning (`sandbox not found: <name>` = absent, `sandbox already exists` = AlreadyExists); everything else is an
MsbCommandError quoting msb's stderr tail, with env values and mount sources masked.

`-q` is never passed: with it, msb 0.7.11 `stop`, `rm` and `volume rm` fail with exit status 1 and print nothing, so
a missing sandbox could not be told from any other failure.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from devsy.driver.base import CancelToken
from devsy.driver.microsandbox.errors import MsbCommandError, MsbTimeout
from devsy.driver.microsandbox.locate import MsbBinary
from devsy.driver.microsandbox.process import stop_group
from devsy.driver.microsandbox.shown_argv import redact_argv, shell_words
from devsy.errors import AlreadyExists, Cancelled, NotFound
from devsy.redaction import redact_text

TAIL_LINES = 12


@dataclass(frozen=True)
class MsbResult:
    returncode: int
    stdout: bytes
    stderr: str  # already redacted

    @property
    def text(self) -> str:
        return self.stdout.decode(errors="replace")


def tail(text: str, lines: int = TAIL_LINES) -> str:
    kept = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def error_summary(stderr: str) -> str:
    """msb's `error: ...` line and its `→` detail lines, joined on one line; else the stderr tail."""
    picked: list[str] = []
    for line in stderr.splitlines():
        text = line.strip()
        if text.startswith("error:"):
            picked.append(text[len("error:"):].strip())
        elif picked and text.startswith("→"):
            picked.append(text.lstrip("→ ").strip())
    return "; ".join(picked) if picked else tail(stderr, 3).replace("\n", "; ")


def sandbox_missing(stderr: str, name: str) -> bool:
    """True only for msb's exact absence report about `name`."""
    return any(line.strip() == f"error: sandbox not found: {name}" for line in stderr.splitlines())


class MsbClient:
    """One msb binary plus the environment it runs in (MSB_HOME, MSB_LIBKRUNFW_PATH come from there)."""

    def __init__(self, binary: MsbBinary, env: Mapping[str, str] | None = None) -> None:
        self.binary = binary
        self._env = dict(env) if env is not None else None

    @property
    def env(self) -> Mapping[str, str]:
        """The environment msb runs with: the given one, else this process's as it is at each call."""
        return self._env if self._env is not None else os.environ

    def describe(self, args: Sequence[str], secrets: Sequence[str] = ()) -> str:
        """The command as it may be shown: env values, mount sources and `secrets` masked."""
        return redact_text(shell_words(["msb", *redact_argv(args)]), secrets)

    def spawn(self, args: Sequence[str], **popen: Any) -> subprocess.Popen:
        """Start msb in its own process group; the caller owns the child (see process.stop_group)."""
        return subprocess.Popen([self.binary.path, *args], env=self._env, start_new_session=True, **popen)

    def run(self, args: Sequence[str], *, action: str, timeout: float, cancel: CancelToken | None = None,
            secrets: Sequence[str] = (), missing: str = "", check: bool = True) -> MsbResult:
        """Run one msb command to completion within `timeout` seconds.

        With `missing` set to a sandbox name, msb's report that it does not exist raises NotFound. With `check`, any
        other non-zero exit raises (AlreadyExists for a duplicate sandbox, else MsbCommandError).
        """
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = self.spawn(args, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            self._wait(proc, args, action=action, timeout=timeout, cancel=cancel, err=err, secrets=secrets)
            result = MsbResult(proc.returncode, _read(out), redact_text(_read(err).decode(errors="replace"), secrets))
        if result.returncode != 0 and missing and sandbox_missing(result.stderr, missing):
            raise NotFound(f"{action}: sandbox {missing} does not exist",
                           hint="run `devsy up` to create the workspace, or `devsy delete` to forget it")
        if result.returncode != 0 and check:
            raise self.failure(args, result, action=action, secrets=secrets)
        return result

    def _wait(self, proc: subprocess.Popen, args: Sequence[str], *, action: str, timeout: float,
              cancel: CancelToken | None, err: IO[bytes], secrets: Sequence[str]) -> None:
        done = threading.Event()
        unsubscribe = cancel.on_cancel(done.set) if cancel is not None else (lambda: None)
        waiter = threading.Thread(target=_reap, args=(proc, done), name="devsy-msb-wait", daemon=True)
        waiter.start()
        try:
            finished = done.wait(timeout) and proc.returncode is not None
        except BaseException:  # Ctrl-C while waiting: never leave msb running behind us
            stop_group(proc)
            raise
        finally:
            unsubscribe()
        if finished:
            waiter.join()
            return
        stop_group(proc)
        waiter.join()
        if cancel is not None and cancel.is_cancelled():
            raise Cancelled(f"{action}: cancelled; `{self.describe(args, secrets)}` was stopped")
        stderr = redact_text(_read(err).decode(errors="replace"), secrets)
        raise MsbTimeout(
            f"{action}: `{self.describe(args, secrets)}` did not finish within {timeout:.0f} s and was stopped"
            + (f"; msb printed:\n{tail(stderr)}" if stderr.strip() else ""),
            hint="check `msb doctor` and the sandbox's system log (`msb logs --source system NAME`), then retry",
        )

    def failure(self, args: Sequence[str], result: MsbResult, *, action: str,
                secrets: Sequence[str] = ()) -> MsbCommandError | AlreadyExists:
        """The typed error for a failed command; `result.stderr` is already redacted."""
        summary = error_summary(result.stderr) or f"exit status {result.returncode}"
        if "sandbox already exists" in result.stderr:
            return AlreadyExists(f"{action}: {summary}", hint="use `devsy up --recreate` to replace it")
        return MsbCommandError(
            f"{action}: `{self.describe(args, secrets)}` failed (exit status {result.returncode}): {summary}",
            hint="fix the cause msb reports above; `msb doctor` checks the host's prerequisites",
            returncode=result.returncode, stderr_tail=tail(result.stderr),
        )


def _reap(proc: subprocess.Popen, done: threading.Event) -> None:
    proc.wait()
    done.set()


def _read(stream: IO[bytes]) -> bytes:
    stream.flush()
    stream.seek(0)
    return stream.read()
