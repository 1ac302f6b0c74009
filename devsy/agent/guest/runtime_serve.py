"""`devsy-agent runtime-serve`: run a workspace's runtime provider on this (remote) machine and carry its one gRPC
connection to the host over this process's stdin and stdout. The host's end is devsy/driver/remote/link.py.

1. The host writes one JSON line: workspace id, agent home, the binaries (per os/arch: URL + sha256), which of them
   is the runtime, and the runtime's environment. It comes on stdin, never argv: the environment holds provider
   options, which may be secrets.
2. The agent installs the binaries (runtime_install: download once, verified, copied into the workspace's folder),
   starts `<runtime copy> serve` in its own process group with the go-plugin handshake environment, reads the
   handshake line and connects to the runtime's Unix socket.
3. It answers one JSON line: {"ok": true, "handshake": LINE, "runtime": {...}} or {"ok": false, "error": {kind,
   message, hint}}.
4. From then on stdin and stdout carry that connection's raw bytes. Either direction ending is the end of the lease
   (the host closes stdin when it is done, and its death closes it too): the runtime's process group is killed and
   reaped, as the host's runtime supervisor does (devsy/runtime/host/supervisor.py), and the agent exits.
The runtime's stderr is the agent's stderr, of which the host keeps a tail for its error messages.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from .download import DownloadError, Policy
from .runtime_install import (
    Installed,
    RequestError,
    agent_home,
    ensure,
    platform,
    select,
    workspace_dir,
)

COOKIE_KEY, COOKIE_VALUE = "DEVSY_RUNTIME_PLUGIN", "devsy-runtime-v1"
_REQUEST_MAX = 1 << 20
_CHUNK = 64 * 1024
_REAP_S = 10.0
_PR_SET_PDEATHSIG = 1


class LaunchError(DownloadError):
    """The runtime did not start serving (exited, timed out, or printed something that is not a handshake)."""

    def __init__(self, kind: str, message: str, hint: str) -> None:
        super().__init__(message, hint)
        self.kind = kind


def serve(stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    try:
        request, leftover = _read_request(stdin_fd)
        installed, runtime = _install(request)
        proc, sock, line, socket_dir = _launch(runtime, installed, request)
    except DownloadError as exc:
        return _refuse(stdout_fd, exc.kind, exc.message, exc.hint)
    except (KeyError, TypeError, ValueError) as exc:
        return _refuse(stdout_fd, RequestError.kind, f"the host's request is malformed: {exc!r}",
                       "use the same devsy version on both ends")
    except OSError as exc:
        return _refuse(stdout_fd, "remote-io", f"preparing the runtime failed on the remote machine: {exc}",
                       "check free space and permissions of the agent's home there")
    try:
        _answer(stdout_fd, {"ok": True, "handshake": line, "runtime": {
            "name": runtime.name, "path": runtime.path, "sha256": runtime.sha256,
            "downloaded": [i.name for i in installed if i.downloaded],
            "copied": [i.name for i in installed if i.copied]}})
        _relay(stdin_fd, stdout_fd, sock, leftover)
    finally:
        _teardown(proc, sock, socket_dir)
    return 0


def _read_request(fd: int) -> tuple:
    data = b""
    while b"\n" not in data:
        chunk = os.read(fd, _CHUNK)
        if not chunk or len(data) > _REQUEST_MAX:
            raise RequestError("the host sent no complete request line", hint="retry; check the exec command")
        data += chunk
    line, _, leftover = data.partition(b"\n")
    try:
        request = json.loads(line.decode("utf-8"))
        missing = [key for key in ("workspace_id", "runtime", "binaries") if key not in request]
        if missing:
            raise KeyError(", ".join(missing))
    except (ValueError, KeyError, TypeError) as exc:
        raise RequestError(f"the host's request is malformed: {exc}", hint="use the same devsy on both ends")
    return request, leftover


def _install(request: dict) -> tuple:
    home = agent_home(request.get("home", ""))
    os_name, arch = platform()
    sources = select(request["binaries"], os_name, arch)
    policy = Policy(**request.get("download", {}))
    installed = ensure(home, request["workspace_id"], sources, policy)
    runtime = [item for item in installed if item.name == request["runtime"]]
    if not runtime:
        declared = ", ".join(i.name for i in installed) or "none"
        raise RequestError(f"the runtime {request['runtime']!r} is not among the declared binaries ({declared})",
                           hint="name one of the provider config's binaries as its runtime")
    return installed, runtime[0]


def _runtime_env(request: dict, installed: list, socket_dir: str, home: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PLUGIN_")) and k != COOKIE_KEY}
    env["DEVSY_AGENT_CACHE"] = os.path.join(home, "unpacked")  # the runtime bundle's libraries, under our home
    env.update({str(k): str(v) for k, v in (request.get("env") or {}).items()
                if not str(k).startswith("PLUGIN_") and k != COOKIE_KEY})
    env.update({item.name: item.path for item in installed})  # each binary's path, for the runtime to find
    # The transport's variables last, so nothing above can override them.
    env.update({COOKIE_KEY: COOKIE_VALUE, "PLUGIN_PROTOCOL_VERSIONS": "1", "PLUGIN_UNIX_SOCKET_DIR": socket_dir})
    return env


def _launch(runtime: Installed, installed: list, request: dict) -> tuple:
    home = agent_home(request.get("home", ""))
    socket_dir = tempfile.mkdtemp(prefix="devsy-plugin-")
    proc = subprocess.Popen([runtime.path, "serve"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            cwd=workspace_dir(home, request["workspace_id"]), start_new_session=True,
                            env=_runtime_env(request, installed, socket_dir, home),
                            preexec_fn=_die_with_agent)  # noqa: PLW1509 - no other thread yet
    try:
        line = _handshake_line(proc, runtime.name, float(request.get("handshake_timeout", 120.0)))
        parts = line.split("|")
        if len(parts) < 5 or parts[2] != "unix" or not parts[3]:
            raise LaunchError("provider-handshake", f"runtime {runtime.name} printed {line[:200]!r} instead of a "
                              "go-plugin handshake line", "the binary is not a devsy runtime provider")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(parts[3])
        except OSError as exc:
            sock.close()
            raise LaunchError("provider-handshake", f"cannot connect to runtime {runtime.name} at {parts[3]}: {exc}",
                              "check the runtime's stderr above")
    except BaseException:
        _teardown(proc, None, socket_dir)
        raise
    threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
    return proc, sock, line, socket_dir


def _die_with_agent() -> None:
    """In the child, before exec: if the agent is killed outright (its teardown never runs), the kernel kills the
    runtime too, so it cannot outlive its lease. The agent has no other thread yet, so preexec_fn is safe here."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the teardown above is all there is


def _handshake_line(proc: subprocess.Popen, name: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    data = b""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LaunchError("provider-handshake-timeout", f"runtime {name} did not complete its handshake within "
                                  f"{timeout:g}s", "check the runtime's stderr above")
            if not selector.select(remaining):
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                try:
                    code = proc.wait(_REAP_S)
                except subprocess.TimeoutExpired:
                    code = "unknown (it closed its stdout but runs on)"
                raise LaunchError("provider-exited", f"runtime {name} exited with status {code} before its "
                                  "handshake", "its stderr (above) says why")
            data += chunk
    return data.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")


def _drain(stream) -> None:
    # Providers print only the handshake on stdout; anything more goes to stderr rather than filling the pipe.
    for chunk in iter(lambda: stream.read1(_CHUNK), b""):
        sys.stderr.buffer.write(chunk)
        sys.stderr.buffer.flush()


def _refuse(fd: int, kind: str, message: str, hint: str) -> int:
    _answer(fd, {"ok": False, "error": {"kind": kind, "message": message, "hint": hint}})
    return 1


def _answer(fd: int, status: dict) -> None:
    _write_all(fd, (json.dumps(status, sort_keys=True) + "\n").encode("utf-8"))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _relay(stdin_fd: int, stdout_fd: int, sock: socket.socket, leftover: bytes) -> None:
    """Copy both ways until either direction ends."""
    done = threading.Event()

    def upstream() -> None:
        try:
            if leftover:
                sock.sendall(leftover)
            for chunk in iter(lambda: os.read(stdin_fd, _CHUNK), b""):
                sock.sendall(chunk)
        except OSError:
            pass
        finally:
            done.set()

    def downstream() -> None:
        try:
            for chunk in iter(lambda: sock.recv(_CHUNK), b""):
                _write_all(stdout_fd, chunk)
        except OSError:
            pass
        finally:
            done.set()

    for target in (upstream, downstream):
        threading.Thread(target=target, daemon=True).start()
    done.wait()


def _teardown(proc: subprocess.Popen, sock: socket.socket | None, socket_dir: str) -> None:
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group: the runtime and anything it started (not setsid'd)
    except ProcessLookupError:
        pass
    try:
        proc.wait(_REAP_S)
    except subprocess.TimeoutExpired:
        pass
    shutil.rmtree(socket_dir, ignore_errors=True)
