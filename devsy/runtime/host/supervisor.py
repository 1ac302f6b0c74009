"""The runtime supervisor: `python -m devsy.runtime.host.supervisor --lease=FD --config=FD`.

The host re-executes itself as this small process so that a provider's whole process tree has an owner that
outlives a host crash. It becomes a child subreaper (orphaned descendants reparent to it, not to init), starts the
provider in a new process group, and tears that group down when the lease pipe reads EOF (the host closed it or
died) or when the provider exits. Teardown SIGKILLs the group and reaps only that group: descendants that started
their own session (setsid, e.g. a detached VMM that must outlive the operation) are neither killed nor waited for.
If the supervisor itself is killed, the kernel kills the provider (parent-death signal), so its host sees the
provider go instead of waiting on it for ever.
Exit codes: 0 clean (lease teardown, SIGTERM, provider exit 0), 1 otherwise. Only the standard library is imported.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

from devsy.runtime.host.supervisor_config import MAX_CONFIG_BYTES, ConfigError, SupervisorConfig

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
# A SIGKILLed process dies unless it is stuck in the kernel; bound the reaping so a stuck one cannot hang us.
_REAP_TIMEOUT_S = 10.0
_WAKE_PROVIDER_EXIT = b"x"
_WAKE_TERM = b"t"


def _log(message: str) -> None:
    print(f"devsy-runtime-supervisor: {message}", file=sys.stderr, flush=True)


_LIBC = ctypes.CDLL(None, use_errno=True)


def become_subreaper() -> None:
    if _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _die_with(parent: int):
    """A preexec hook: the provider gets SIGKILL when its supervisor dies, however it dies (SIGKILL included), so a
    provider never serves on with nobody to tear it down and its host never waits on it for ever."""

    def hook() -> None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died between fork and prctl: nothing would signal us
            os._exit(1)

    return hook


def read_config(fd: int) -> SupervisorConfig:
    chunks, size = [], 0
    with os.fdopen(fd, "rb", closefd=True) as stream:
        while chunk := stream.read(65536):
            size += len(chunk)
            if size > MAX_CONFIG_BYTES:
                raise ConfigError(f"the config is larger than {MAX_CONFIG_BYTES} bytes")
            chunks.append(chunk)
    return SupervisorConfig.from_json(b"".join(chunks))


def start_provider(config: SupervisorConfig) -> subprocess.Popen:
    """The provider in a new process group; stdin /dev/null, stdout and stderr inherited (they go to the host).
    Called before any thread starts, so the preexec hook runs in a single-threaded fork."""
    return subprocess.Popen(  # noqa: S603 - the host chose the binary; argv is never a shell string
        [config.binary, *config.args], stdin=subprocess.DEVNULL, env=config.provider_env(),
        cwd=config.cwd or None, process_group=0, close_fds=True, preexec_fn=_die_with(os.getpid()))


def _watch_provider(pid: int, wake_fd: int) -> None:
    # WNOWAIT leaves the provider a zombie: its pid, and so its process group id, cannot be reused before teardown.
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    os.write(wake_fd, _WAKE_PROVIDER_EXIT)


def provider_status(pid: int) -> tuple[int, str]:
    """(exit code for the supervisor, description) of the exited, not yet reaped provider."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if info is None:
        return 1, "is still running"
    if info.si_code == os.CLD_EXITED:
        return (0 if info.si_status == 0 else 1), f"exited with status {info.si_status}"
    return 1, f"was killed by signal {signal.Signals(info.si_status).name}"


def teardown(pgid: int, kill_and_reap_group: Callable[[int, float], tuple[int, bool]]) -> int:
    """SIGKILL the provider's process group and reap its members only; returns how many were reaped."""
    reaped, complete = kill_and_reap_group(pgid, _REAP_TIMEOUT_S)
    if not complete:
        _log(f"gave up reaping process group {pgid} after {_REAP_TIMEOUT_S:.0f}s (a member is stuck in the kernel)")
    return reaped


def supervise(lease_fd: int, config_fd: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal ^C goes to the host, which decides
    try:
        config = read_config(config_fd)
        become_subreaper()
        provider = start_provider(config)
    except (ConfigError, OSError) as exc:
        _log(f"cannot start the provider: {exc}")
        return 1
    # Now, not before the provider starts (its imports, dataclasses and pathlib, would delay every launch), and not
    # at teardown, hours later, when the installed devsy may have changed on disk.
    from devsy.process_tree import kill_and_reap_group
    # The provider holds stdout now; dropping ours lets the host see EOF as soon as the provider's tree is gone.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    wake_r, wake_w = os.pipe()
    signal.signal(signal.SIGTERM, lambda *_: os.write(wake_w, _WAKE_TERM))
    threading.Thread(target=_watch_provider, args=(provider.pid, wake_w), daemon=True).start()
    poller = select.poll()
    poller.register(lease_fd, select.POLLIN | select.POLLHUP)
    poller.register(wake_r, select.POLLIN)
    code, reason = 0, ""
    while not reason:
        for fd, _ in poller.poll():
            if fd == lease_fd and not os.read(lease_fd, 4096):
                reason = "the lease closed"
            elif fd == wake_r:
                wake = os.read(wake_r, 1)
                if wake == _WAKE_TERM:
                    reason = "SIGTERM"
                else:
                    code, reason = provider_status(provider.pid)
                    reason = f"the provider {reason}"
    reaped = teardown(provider.pid, kill_and_reap_group)
    if code != 0:
        _log(f"{reason}; tore down its process group ({reaped} process(es))")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="devsy runtime-supervisor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lease", type=int, required=True, metavar="FD", help="inherited pipe; EOF = tear down")
    parser.add_argument("--config", type=int, required=True, metavar="FD", help="inherited pipe carrying the JSON "
                                                                                "config (binary, args, env, cwd)")
    args = parser.parse_args(argv)
    return supervise(args.lease, args.config)


if __name__ == "__main__":
    sys.exit(main())
