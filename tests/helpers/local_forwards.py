"""`ssh -v -L ... <id>.devsy 'read _'` through the written `Host <id>.devsy` entry: the real OpenSSH client with one
or more local forwards, ready once OpenSSH's own debug output says each one listens (after authentication: a probe
connection would be a forwarded connection of its own)."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import time

from helpers.cli import cli_env

LISTEN_BOUND_S = 30.0
SSH_END_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalForwards:
    """Forwards 127.0.0.1:`locals[i]` to 127.0.0.1:`targets[i]` as the guest sees it."""

    def __init__(self, devsy, workspace: str, targets: list[int], *options: str) -> None:
        self.locals = [free_port() for _ in targets]
        specs = [arg for local, target in zip(self.locals, targets) for arg in
                 ("-L", f"127.0.0.1:{local}:127.0.0.1:{target}")]
        self.proc = subprocess.Popen(
            ["ssh", "-v", "-F", str(devsy.ssh_config), "-o", "ExitOnForwardFailure=yes", *options, *specs,
             f"{workspace}.devsy", "read _"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env(devsy))
        self.stderr = b""
        for local in self.locals:
            self.wait_for(f"Local connections to 127.0.0.1:{local} forwarded".encode())

    def wait_for(self, line: bytes, timeout: float = LISTEN_BOUND_S) -> None:
        """Until OpenSSH's debug output holds `line` (its own account of an event, not a guess by time)."""
        deadline = time.monotonic() + timeout
        while line not in self.stderr:
            remaining = deadline - time.monotonic()
            assert remaining > 0 and self.proc.poll() is None, (line, self.stderr.decode(errors="replace")[-3000:])
            if select.select([self.proc.stderr], [], [], remaining)[0]:
                chunk = os.read(self.proc.stderr.fileno(), 65536)  # type: ignore[union-attr]
                assert chunk or self.proc.poll() is None, self.stderr.decode(errors="replace")[-3000:]
                self.stderr += chunk

    def finish(self) -> bytes:
        """End as a session does: our end of its input closes, the remote `read` returns (exit 1 at end of input)
        and OpenSSH exits by itself. Its whole debug output."""
        _, rest = self.proc.communicate(b"", timeout=SSH_END_S)
        assert self.proc.returncode == 1, (self.proc.returncode, rest)
        return self.stderr + rest

    def close(self) -> None:
        """End it however it stands (a test's cleanup): input closed, then a bounded wait, then KILL."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=SSH_END_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=SSH_END_S)
