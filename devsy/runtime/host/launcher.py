"""Host side of the supervisor: start `python -m devsy.runtime.host.supervisor` with a lease pipe and a config pipe.

The host keeps the lease's write end; closing it (or dying, which closes it too) makes the supervisor tear the
provider's process group down. The provider's stdout (the handshake line) and stderr come back to us through the
supervisor, which hands its own stdout and stderr to the provider.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from devsy import process_tree
from devsy.redaction import Redactor
from devsy.runtime.wire.constants import is_transport_key
from devsy.runtime.host.stderr_tail import StderrTail
from devsy.runtime.host.supervisor_config import SupervisorConfig



@dataclass
class ProviderCommand:
    """How to run a provider: exactly `binary args...` (the protocol has no subcommand convention; devsy's own
    providers declare `serve` in their provider rows). `env` and `args` may hold secrets: they travel by pipe and
    are redacted from errors."""

    binary: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    inherit_env: bool = True  # start from the host's environment (PATH, HOME, DOCKER_HOST, ...)

    @property
    def name(self) -> str:
        return os.path.basename(self.binary)

    def redactor(self) -> Redactor:
        return Redactor(self.secrets())

    def secrets(self) -> list[str]:
        """What may be secret in it: every env value and every argument."""
        return [*self.env.values(), *self.args]


def _clean_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not is_transport_key(k)}


class SupervisedProvider:
    """A provider running under its own supervisor. Always `close()` it (or let the host exit)."""

    def __init__(self, command: ProviderCommand, transport: dict[str, str]) -> None:
        self.command = command
        self._redact = command.redactor()
        base = _clean_env(dict(os.environ)) if command.inherit_env else {}
        config = SupervisorConfig(binary=command.binary, args=list(command.args),
                                  env={**base, **command.env}, cwd=command.cwd, transport=transport)
        lease_r, self._lease_w = os.pipe()
        config_r, config_w = os.pipe()
        try:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", "devsy.runtime.host.supervisor", f"--lease={lease_r}", f"--config={config_r}"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=(lease_r, config_r), env=_clean_env(dict(os.environ)))
        except BaseException:
            for fd in (self._lease_w, config_w):
                os.close(fd)
            raise
        finally:
            os.close(lease_r)
            os.close(config_r)
        threading.Thread(target=self._write_config, args=(config_w, config.to_json()), daemon=True,
                         name="provider-config").start()
        assert self.process.stderr is not None
        self._stderr = StderrTail(self.process.stderr, self._redact, "provider-stderr")

    @staticmethod
    def _write_config(fd: int, data: bytes) -> None:
        with contextlib.suppress(OSError), os.fdopen(fd, "wb") as stream:
            stream.write(data)

    def stderr_tail(self, wait: float = 0.0) -> str:
        """The last lines the provider (or its supervisor) wrote to stderr, with secrets redacted."""
        return self._stderr.text(wait)

    def read_line(self, timeout: float) -> tuple[str | None, bool]:
        """(line, timed_out): the first stdout line; None at EOF or when `timeout` seconds pass first."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        buf = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None, True
                if not selector.select(remaining):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    return None, False
                buf += chunk
        return buf.split(b"\n", 1)[0].decode("utf-8", "replace"), False

    def exit_code(self, wait: float = 0.0) -> int | None:
        return process_tree.wait_child(self.process, wait) if wait else self.process.poll()

    def close(self, timeout: float = 10.0) -> None:
        """Close the lease (the supervisor kills the provider's group) and reap the supervisor."""
        if self._lease_w >= 0:
            os.close(self._lease_w)
            self._lease_w = -1
        process_tree.stop_child(self.process, group=False, term=False, grace=timeout, kill_wait=timeout)
        if self.process.stdout is not None:
            self.process.stdout.close()
        # A setsid'd descendant may keep stderr open for good; then the drain thread keeps it, bounded by its life.
        if self._stderr.done.wait(2.0) and self.process.stderr is not None:
            self.process.stderr.close()
