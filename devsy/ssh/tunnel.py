"""The byte pipe to the agent's `ssh-server --stdio`: driver.exec of the agent, wired to a descriptor and a writer.

Bytes for the agent are read from `input_fd` only after the agent has written its first byte (its SSH banner). So if
the agent file is missing in the guest (exit 199, nothing written), not one byte of the client's stream has been
consumed, and the tunnel delivers the agent and starts it again on the same descriptor: the SSH client (paramiko or
OpenSSH) never notices. The descriptor belongs to the caller and is never closed here.
"""

from __future__ import annotations

import io
import os
import select
import threading
from collections.abc import Callable
from typing import BinaryIO

from devsy.agent.install import EXIT_AGENT_MISSING, launch_argv
from devsy.driver.base import CancelToken, Driver, ExecRequest, ExecResult

_CHUNK = 1024 * 1024
DISPOSE_WAIT_S = 2.0  # how long GatedInput.dispose waits for a read under way (see there)


class GatedInput(io.RawIOBase):
    """The exec's stdin: reads `fd` once the gate is open; close() wakes a blocked read at once.

    It has no fileno() on purpose, so the driver reads through read1(), where the gate and close() apply. `read`
    replaces os.read for a source whose descriptor only signals readiness (a paramiko channel's: exec_sessions.py).
    A terminal session through telnetd (exec_telnet.py) also uses the rest: `encode` rewrites the source's bytes,
    push() sends bytes of its own ahead of them (a window size), and `hold_at_eof` keeps the input open after the
    source's end, until close(), as sshd keeps a pty open when its client's input ends. With `owns_fd`, dispose()
    closes `fd` too (the SSH master's copy of a client's stdin: mux/driver_session.py).
    """

    def __init__(self, fd: int, read: Callable[[int], bytes] | None = None, *,
                 encode: Callable[[bytes], bytes] | None = None, hold_at_eof: bool = False,
                 owns_fd: bool = False) -> None:
        super().__init__()
        self._fd = fd
        self._owns_fd = owns_fd
        self._read = read or (lambda size: os.read(fd, size))
        self._encode = encode
        self._hold_at_eof = hold_at_eof
        self._source_ended = False
        self._pending: list[bytes] = []  # pushed (or encoded) bytes not read yet, guarded by _wake_lock
        self._gate = threading.Event()
        self._closing = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._wake_lock = threading.Lock()  # written from other threads, closed by dispose()
        self._wake_open = True
        # Held by read1 while it polls and reads, so that what dispose() closes is never closed under a read (a
        # driver's stdin copier can still be in read1 when its exec returns), and a number it closed is never read.
        self._reading = threading.Lock()
        self._disposed = False  # set under _wake_lock

    def readable(self) -> bool:
        return True

    def open_gate(self) -> None:
        if not self._gate.is_set():
            self._gate.set()
            self._wake()

    def push(self, data: bytes) -> None:
        """Send `data` before the source's next bytes (once the gate is open), from any thread."""
        with self._wake_lock:
            self._pending.append(data)
        self._wake()

    def read1(self, size: int = _CHUNK) -> bytes:
        """Up to `size` bytes once the gate is open; b"" when closed or at end of input. The driver calls this
        (rather than readinto) when it exists, which saves two copies of every chunk."""
        size = min(size if size > 0 else _CHUNK, _CHUNK)
        with self._reading:
            try:
                return self._read1(size)
            finally:
                if self._disposed:  # dispose() stopped waiting for this read: what it would close is ours to close
                    self._release()

    def _read1(self, size: int) -> bytes:
        while not self._closing.is_set():
            if self._gate.is_set():
                pending = self._take_pending(size)
                if pending:
                    return pending
            poller = select.poll()  # not select(): the SSH master may hold descriptors past 1023
            poller.register(self._wake_r, select.POLLIN)
            if self._gate.is_set() and not self._source_ended:
                poller.register(self._fd, select.POLLIN)
            ready = dict(poller.poll())
            if self._closing.is_set():
                break
            if self._fd in ready:
                try:
                    data = self._read(size)
                except BlockingIOError:
                    continue  # a non-blocking source another reader emptied after poll(): poll again
                if not data and self._hold_at_eof:
                    self._source_ended = True  # from now on only pushes and close() end the wait
                    continue
                if self._encode is None or not data:
                    return data
                encoded = self._encode(data)
                if len(encoded) > size:
                    with self._wake_lock:  # what encoding added beyond `size` goes next, before any later push
                        self._pending.insert(0, encoded[size:])
                return encoded[:size]
            os.read(self._wake_r, 64)  # a gate, push or close notice; the loop re-reads the flags
        return b""

    def _take_pending(self, size: int) -> bytes:
        with self._wake_lock:
            pending = b"".join(self._pending)
            self._pending = [pending[size:]] if len(pending) > size else []
        return pending[:size]

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self._closing.is_set():
            self._closing.set()
            self._wake()
        super().close()

    def dispose(self, wait: float = DISPOSE_WAIT_S) -> None:
        """Release the wake pipe (and an owned `fd`) once exec has returned. A copier still in read1 is woken by the
        close and left to return first. One can be blocked in a read that close() cannot wake: another reader of a
        shared `fd` (a terminal, a pipe) took the bytes poll() announced. After `wait` seconds that copier is left to
        release them itself when its read returns, so no number is closed under it, and this returns."""
        self.close()
        with self._wake_lock:
            self._disposed = True
        if self._reading.acquire(timeout=wait):
            try:
                self._release()
            finally:
                self._reading.release()

    def _release(self) -> None:
        with self._wake_lock:
            if not self._wake_open:
                return
            self._wake_open = False
            os.close(self._wake_r)
            os.close(self._wake_w)
            if self._owns_fd:
                os.close(self._fd)

    def _wake(self) -> None:
        with self._wake_lock:
            if self._wake_open:
                os.write(self._wake_w, b"!")


class _AgentOutput(io.RawIOBase):
    """The exec's stdout: passes bytes on untouched and opens the input gate at the first one."""

    def __init__(self, write: Callable[[bytes], None], gate: GatedInput) -> None:
        super().__init__()
        self._write = write
        self._gate = gate
        self.seen = False

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        if data:
            self._write(bytes(data))
            if not self.seen:
                self.seen = True
                self._gate.open_gate()
        return len(data)


class Tunnel:
    """What a tunnel gives its callers (connection.py, command.py): run() in the calling thread or start() in one of
    its own, join(), then `result` or `error`, and whether the peer spoke at all (`output_seen`)."""

    def __init__(self, name: str, cancel: CancelToken, on_end: Callable[[], None], *, output_seen: bool) -> None:
        self.cancel, self.on_end, self.output_seen = cancel, on_end, output_seen
        self.result: ExecResult | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self.run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def run(self) -> None:
        raise NotImplementedError


class AgentTunnel(Tunnel):
    """Runs the agent over driver exec (in the calling thread with run(), or in a thread with start())."""

    def __init__(self, driver: Driver, workspace_id: str, guest_path: str, args: list[str], *, input_fd: int,
                 write_output: Callable[[bytes], None], stderr: BinaryIO, cancel: CancelToken,
                 redeliver: Callable[[], str], on_end: Callable[[], None] = lambda: None,
                 env: dict[str, str] | None = None) -> None:
        super().__init__("devsy-ssh-tunnel", cancel, on_end, output_seen=False)
        self.driver, self.workspace_id, self.guest_path, self.args = driver, workspace_id, guest_path, args
        self.env = dict(env or {})  # the agent process's own additions (its sessions' remoteEnv, see command.py)
        self.input_fd, self.write_output, self.stderr = input_fd, write_output, stderr
        self.redeliver = redeliver

    def run(self) -> None:
        try:
            self.result = self._attempt()
            if self.result.exit_code == EXIT_AGENT_MISSING and not self.output_seen and not self.cancel.is_cancelled():
                self.guest_path = self.redeliver()
                self.result = self._attempt()
        except BaseException as exc:  # reported by the caller after join(); a thread cannot raise to it
            self.error = exc
        finally:
            self.on_end()

    def _attempt(self) -> ExecResult:
        gated = GatedInput(self.input_fd)
        output = _AgentOutput(self.write_output, gated)
        request = ExecRequest(argv=launch_argv(self.guest_path, *self.args), stdin=gated, owns_stdin=True,
                              stdout=output, stderr=self.stderr, user="0", cancel=self.cancel,  # type: ignore
                              env=dict(self.env))
        try:
            return self.driver.exec(self.workspace_id, request)
        finally:
            self.output_seen = self.output_seen or output.seen
            gated.dispose()
