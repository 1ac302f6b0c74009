"""ssh-streams: `devsy ssh` carries stdin, stdout, stderr and the exit status byte for byte (CATALOGUE.md).

Every case brings up its own image-only workspace and speaks to it only through the devsy CLI and, for
openssh-client, the real OpenSSH client through the entry `devsy up` wrote. The checks are functions
(`check_*`) so no-python-image runs the same ones on the images without python, where devsy's SSH sessions are
execs served from the host (issue 18) instead of the in-guest agent.
"""

from __future__ import annotations

import hashlib
import os
import random
import statistics
import subprocess
import uuid
from collections.abc import Callable

from harness import case
from harness.backends import BackendInspector
from harness.case_context import CaseContext
from harness.commands import CompletedCommand, run_bounded
from harness.devsy_handle import DevsyHandle
from harness.providers import Provider
from scenarios.live_command import LiveCommand
from scenarios.support import FigureSink, local_source, no_python_images, only_instance, ssh_path

MIB = 1 << 20
LARGE = 64 * MIB
STALL_BOUND_S = 20.0
LATENCY_RUNS = 5


def _running(case: CaseContext, devsy: DevsyHandle) -> str:
    wid = case.workspace_id()
    devsy.up(local_source(case), wid).ws()
    return wid


def _ssh(devsy: DevsyHandle, wid: str, command: str, *, input_bytes: bytes | None = None) -> CompletedCommand:
    return devsy.run("ssh", wid, "--command", command, input_bytes=input_bytes)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _mb_per_s(size: int, seconds: float) -> float:
    return round(size / 1e6 / seconds, 1)


def check_binary_roundtrip(devsy: DevsyHandle, wid: str, record_figure: FigureSink, prefix: str = "") -> None:
    """1 MiB through `devsy ssh --command cat`, byte-exact; its size, digest and time are recorded."""
    # Every byte value, CR/LF pairs, NULs and what looks like an SSH banner, then random bytes: 1 MiB in all.
    head = bytes(range(256)) + b"\r\n\n\r\x00\x00SSH-2.0-fake\r\n~.\x03\x04"
    data = head + os.urandom(MIB - len(head))

    result = _ssh(devsy, wid, "cat", input_bytes=data)

    assert result.exit_code == 0, f"`devsy ssh --command cat` exited {result.exit_code}: {result.stderr[-2000:]!r}"
    assert len(result.stdout) == len(data), f"{len(data)} bytes in, {len(result.stdout)} out"
    assert _sha(result.stdout) == _sha(data), "the bytes that came back differ from the bytes sent"
    assert result.stderr == b"", f"unexpected stderr: {result.stderr[-2000:]!r}"
    record_figure(f"{prefix}roundtrip_bytes", len(data))
    record_figure(f"{prefix}roundtrip_sha256", _sha(data))
    record_figure(f"{prefix}roundtrip_seconds", round(result.duration, 3))


def check_stderr_separate(devsy: DevsyHandle, wid: str) -> None:
    """stderr without a trailing newline arrives exactly and on stderr only, through ssh and exec."""
    command = r"printf 'out\000put'; printf 'e\000rr-no-newline' >&2; printf ' more-out'"

    result = _ssh(devsy, wid, command)

    assert result.exit_code == 0, result.stderr[-2000:]
    assert result.stdout == b"out\x00put more-out", f"stdout: {result.stdout!r}"
    assert result.stderr == b"e\x00rr-no-newline", f"stderr (must hold the guest's stderr only): {result.stderr!r}"
    # The same through `devsy exec`, the ordinary output path (the redaction filter is in it when secrets are set).
    exec_result = devsy.exec(wid, ["/bin/sh", "-c", command])
    assert (exec_result.stdout, exec_result.stderr) == (b"out\x00put more-out", b"e\x00rr-no-newline")


def check_exit_status(devsy: DevsyHandle, wid: str) -> None:
    """The guest command's own status (and 128+n for a signal) is devsy's exit status."""
    assert _ssh(devsy, wid, "exit 23").exit_code == 23
    assert _ssh(devsy, wid, "true").exit_code == 0
    assert _ssh(devsy, wid, "sh -c 'exit 1'; exit 0").exit_code == 0, "the status is the command's, not a child's"
    # Killed by a signal: 128 + the signal's number, as a shell reports it.
    assert _ssh(devsy, wid, "kill -TERM $$").exit_code == 128 + 15
    assert devsy.exec(wid, ["/bin/sh", "-c", "exit 23"]).exit_code == 23


def check_openssh_client(devsy: DevsyHandle, wid: str) -> None:
    """The real OpenSSH client through the entry `devsy up` wrote: user, folder, bytes, stderr and status."""
    host = f"{wid}.devsy"
    # A "secret" that is the agent's SSH banner: any filter on the ProxyCommand stream would break the handshake.
    env = devsy.env({"DEVSY_REDACT": "SSH-2.0-paramiko"})

    def openssh(command: str, input_bytes: bytes | None = None) -> CompletedCommand:
        argv = ["ssh", "-F", str(devsy.ssh_config), "-o", "BatchMode=yes", host, command]
        completed = run_bounded(argv, timeout=devsy.deadline.timeout("ssh", 120), env=env, input_bytes=input_bytes)
        devsy.log.add(completed.record(note="OpenSSH client through the written entry"))
        return completed

    hello = openssh("echo hi; id -un; pwd")
    ws = devsy.status(wid).ws()
    assert (hello.exit_code, hello.stdout) == (0, f"hi\ndev\n{ws.workspace_folder}\n".encode()), hello.stderr
    assert hello.stderr == b"", f"OpenSSH printed warnings or prompts: {hello.stderr!r}"

    data = os.urandom(256 * 1024)
    piped = openssh("sha256sum; printf 'to-stderr' >&2; exit 9", input_bytes=data)
    assert piped.exit_code == 9, piped.stderr
    assert piped.stdout.split()[0].decode() == _sha(data), "bytes through OpenSSH arrived altered"
    assert piped.stderr == b"to-stderr"


def check_terminal(devsy: DevsyHandle, wid: str) -> None:
    """OpenSSH's `-tt` through the written entry: a pty in the guest (the agent's, or for exec sessions util-linux
    `script` or busybox telnetd), in the workspace folder, with TERM, tabs as they are, and the command's status.
    (Its size is unknown without a local terminal: `stty size` differs between images then.)"""
    argv = ["ssh", "-F", str(devsy.ssh_config), "-o", "BatchMode=yes", "-tt", f"{wid}.devsy",
            'tty; echo "term=$TERM at=$PWD"; printf "a\\tb\\n"; exit 5']
    completed = run_bounded(argv, timeout=devsy.deadline.timeout("ssh", 120), env=devsy.env({"TERM": "vt100"}))
    devsy.log.add(completed.record(note="OpenSSH client with a terminal (-tt)"))
    folder = devsy.status(wid).ws().workspace_folder
    lines = completed.stdout.split(b"\r\n")
    assert completed.exit_code == 5, completed.stderr
    assert len(lines) == 4 and lines[0].startswith(b"/dev/pts/") and lines[3] == b"", completed.stdout
    assert lines[1] == b"term=vt100 at=" + folder.encode(), completed.stdout
    assert lines[2] == b"a\tb", completed.stdout


@case("ssh-streams/binary-roundtrip")
def test_binary_roundtrip(provider: Provider, case: CaseContext, devsy: DevsyHandle, record_figure: FigureSink) -> None:
    check_binary_roundtrip(devsy, _running(case, devsy), record_figure)


@case("ssh-streams/stderr-separate")
def test_stderr_separate(provider: Provider, case: CaseContext, devsy: DevsyHandle) -> None:
    check_stderr_separate(devsy, _running(case, devsy))


@case("ssh-streams/exit-status")
def test_exit_status(provider: Provider, case: CaseContext, devsy: DevsyHandle) -> None:
    check_exit_status(devsy, _running(case, devsy))


@case("ssh-streams/redaction-boundary")
def test_redaction_boundary(provider: Provider, case: CaseContext, devsy: DevsyHandle) -> None:
    wid = _running(case, devsy)
    secret = f"tunnel-secret-{uuid.uuid4().hex[:12]}"
    redact = {"DEVSY_REDACT": secret}
    # The guest prints the first bytes of the secret and then waits for us, so they end a read: a filter on the
    # tunnel would hold them back and the first read below would stall.
    command = f"printf '%s' '{secret[:3]}'; read reply; printf '%s|%s' '{secret[3:]}' \"$reply\""
    with LiveCommand(devsy, "ssh", wid, "--command", command, stdin=subprocess.PIPE, env=redact) as live:
        first = live.read_stdout(3, cap=STALL_BOUND_S)
        live.write_stdin(b"go\n", close=True)
        done = live.finish()
    assert first == secret[:3].encode(), "bytes that begin a secret were changed on the SSH path"
    assert done.exit_code == 0, done.stderr[-2000:]
    assert done.stdout == f"{secret}|go".encode(), f"the tunnel altered the output: {done.stdout!r}"

    # `devsy exec` is a session too: the secret's bytes pass unaltered, a prefix at a read boundary without stall.
    whole = devsy.run("exec", wid, "--", "printf", "%s", f"a {secret} b", env=redact)
    assert whole.stdout == f"a {secret} b".encode(), f"exec altered the guest's output: {whole.stdout!r}"
    split = f"printf '%s' '{secret[:3]}'; read reply; printf '%s' '{secret[3:]}'"
    with LiveCommand(devsy, "exec", wid, "--", "/bin/sh", "-c", split, stdin=subprocess.PIPE, env=redact) as live:
        head = live.read_stdout(3, cap=STALL_BOUND_S)
        live.write_stdin(b"ok\n", close=True)
        rest = live.finish()
    assert head == secret[:3].encode() and rest.stdout == secret.encode(), rest.stdout
    # What devsy itself prints is redacted: an error naming the secret (here as a workspace id) masks it.
    own = devsy.run("status", secret, "--json", env=redact)
    assert own.exit_code != 0, own.stdout[-2000:]
    printed = own.stdout + own.stderr
    assert secret.encode() not in printed and b"***" in printed, f"devsy printed the secret: {printed[-2000:]!r}"


@case("ssh-streams/openssh-client")
def test_openssh_client(provider: Provider, case: CaseContext, devsy: DevsyHandle) -> None:
    check_openssh_client(devsy, _running(case, devsy))


@case("ssh-streams/no-python-image")
def test_no_python_image(provider: Provider, case: CaseContext, devsy: DevsyHandle, record_figure: FigureSink
                         ) -> None:
    images = no_python_images(case)  # not runnable (with the builder's evidence) when one cannot be had here
    # The contrast: the default image runs devsy's agent, so its sessions are the agent's.
    control = _running(case, devsy)
    assert ssh_path(devsy, control) == "agent", f"{control} (the python image) is not served by the agent"
    check_terminal(devsy, control)
    devsy.delete(control).expect_success()
    for image in images:
        name = image.split(":")[0].removeprefix("devsy-guest-")
        wid = case.workspace_id(name)
        devsy.up(local_source(case, name, image=image), wid).ws()
        assert ssh_path(devsy, wid) == "exec", f"{wid} ({image}, no python) is not served by exec sessions"
        check_binary_roundtrip(devsy, wid, record_figure, prefix=f"{name}_")
        check_stderr_separate(devsy, wid)
        check_exit_status(devsy, wid)
        check_openssh_client(devsy, wid)
        check_terminal(devsy, wid)
        devsy.delete(wid).expect_success()  # one workspace at a time: the next image's up starts clean


@case("ssh-streams/large-stream")
def test_large_stream(
    provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector, record_figure: FigureSink
) -> None:
    wid = _running(case, devsy)
    data = random.Random(64).randbytes(LARGE)
    generate = "python3 -c 'import random,sys; sys.stdout.buffer.write(random.Random(64).randbytes(64 << 20))'"
    paths = {"ssh": _devsy_path(devsy, ["ssh", wid, "--command"]),
             "exec": _devsy_path(devsy, ["exec", wid, "--", "/bin/sh", "-c"])}
    if provider.backend == "docker":  # the floor devsy's paths are compared with (issue 4: ssh >= 0.5 x raw)
        paths["raw_docker_exec"] = _docker_path(case, devsy, only_instance(backend, wid).id)
    figures: dict[str, float] = {}
    for name, run in paths.items():
        up = run("sha256sum", data)
        assert up.exit_code == 0 and up.stdout.split()[0].decode() == _sha(data), \
            f"64 MiB into the guest through {name} arrived altered: {up.stdout[:200]!r} {up.stderr[-1000:]!r}"
        down = run(generate, None)
        assert down.exit_code == 0 and len(down.stdout) == LARGE, \
            f"64 MiB out of the guest through {name}: exit {down.exit_code}, {len(down.stdout)} bytes"
        assert _sha(down.stdout) == _sha(data), f"64 MiB out of the guest through {name} arrived altered"
        figures[f"{name}_upload_mb_per_s"] = _mb_per_s(LARGE, up.duration)
        figures[f"{name}_download_mb_per_s"] = _mb_per_s(LARGE, down.duration)
        figures[f"{name}_true_median_s"] = round(statistics.median(_timed(run("true", None))
                                                                   for _ in range(LATENCY_RUNS)), 3)
    if "raw_docker_exec" in paths:
        for direction in ("upload", "download"):
            figures[f"ssh_vs_raw_{direction}_ratio"] = round(
                figures[f"ssh_{direction}_mb_per_s"] / figures[f"raw_docker_exec_{direction}_mb_per_s"], 2)
        figures["ssh_vs_raw_true_latency_ratio"] = round(
            figures["ssh_true_median_s"] / figures["raw_docker_exec_true_median_s"], 2)
    for name, value in figures.items():
        record_figure(name, value)


# A transfer path: (shell script, stdin bytes or None) -> the completed command.
TransferPath = Callable[[str, "bytes | None"], CompletedCommand]


def _devsy_path(devsy: DevsyHandle, prefix: list[str]) -> TransferPath:
    return lambda script, input_bytes: devsy.run(*prefix, script, input_bytes=input_bytes)


def _docker_path(case: CaseContext, devsy: DevsyHandle, container: str) -> TransferPath:
    """Plain `docker exec` as the same user (the harness's own path, not devsy's), recorded in the case log."""

    def run(script: str, input_bytes: bytes | None) -> CompletedCommand:
        argv = ["docker", "exec", *(["-i"] if input_bytes is not None else []), "-u", "dev", container,
                "/bin/sh", "-c", script]
        completed = run_bounded(argv, timeout=case.deadline.timeout("docker exec", 240), input_bytes=input_bytes)
        devsy.log.add(completed.record(note="raw docker exec baseline"))
        return completed

    return run


def _timed(completed: CompletedCommand) -> float:
    assert completed.exit_code == 0, completed.stderr[-1000:]
    return completed.duration
