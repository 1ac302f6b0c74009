"""`devsy ssh` on the real engine: byte-exact streams, exit status, redaction bypass, and the OpenSSH client."""

from __future__ import annotations

import hashlib
import os
import random
import select
import subprocess
import time

from helpers.cli import DEVSY, cli_env

MIB = 1024 * 1024


def ssh(devsy, workspace: str, command: str, *args: str, input: bytes = b"", **kw):
    return devsy.run("ssh", workspace, *args, "--command", command, input=input, **kw)


def test_one_mib_of_random_bytes_roundtrips_exactly(devsy, running_workspace):
    data = os.urandom(MIB)
    result = ssh(devsy, running_workspace, "cat", input=data)
    assert result.returncode == 0, result.stderr
    assert hashlib.sha256(result.stdout).hexdigest() == hashlib.sha256(data).hexdigest()


def test_stderr_without_trailing_newline_arrives_exactly_on_stderr_only(devsy, running_workspace):
    result = ssh(devsy, running_workspace, r"printf 'out\000put'; printf 'e\000rr-no-newline' >&2")
    assert result.returncode == 0
    assert (result.stdout, result.stderr) == (b"out\x00put", b"e\x00rr-no-newline")


def test_exit_status_becomes_the_exit_code(devsy, running_workspace):
    assert ssh(devsy, running_workspace, "exit 23").returncode == 23


def test_death_by_signal_exits_128_plus_the_signal(devsy, running_workspace):
    assert ssh(devsy, running_workspace, "kill -TERM $$").returncode == 128 + 15


def test_session_runs_as_the_remote_user_in_the_workspace_folder_with_env(devsy, running_workspace):
    result = ssh(devsy, running_workspace, 'printf "%s|%s|%s|%s" "$(id -un)" "$HOME" "$PWD" "$GREETING"',
                 "--env", "GREETING=hello there")
    assert result.stdout.decode() == "dev|/home/dev|/workspaces/running-project|hello there", result.stderr
    as_alt = ssh(devsy, running_workspace, "id -un", "--user", "alt")
    assert as_alt.stdout == b"alt\n"


def test_unknown_user_fails_with_a_message(devsy, running_workspace):
    result = ssh(devsy, running_workspace, "true", "--user", "nobody-here")
    assert result.returncode == 1
    assert b"no user 'nobody-here'" in result.stderr


def test_secret_prefix_at_a_read_boundary_passes_the_tunnel_untouched_and_without_stall(devsy, running_workspace):
    """The command prints the first bytes of a configured secret, then waits for us: a filter on this path would
    hold them back and we would wait forever (bounded here by 20 s). Exec output is not filtered either."""
    secret = "tunnel-secret-value"
    env = cli_env(devsy, DEVSY_REDACT=secret)
    command = f"printf '{secret[:3]}'; read reply; printf '{secret[3:]}'"
    proc = subprocess.Popen([*DEVSY, "ssh", running_workspace, "--command", command], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        first = _read_exactly(proc.stdout, 3, timeout=20)
        assert first == secret[:3].encode(), "bytes that begin a secret were held back on the SSH path"
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        rest = proc.stdout.read()
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
    assert first + rest == secret.encode()
    unaltered = devsy.run("exec", running_workspace, "--", "printf", f"a {secret} b", extra_env={"DEVSY_REDACT": secret})
    assert unaltered.stdout == f"a {secret} b".encode()


def _read_exactly(stream, size: int, timeout: float) -> bytes:
    deadline, data = time.monotonic() + timeout, b""
    while len(data) < size and time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        if ready:
            chunk = os.read(stream.fileno(), size - len(data))
            if not chunk:
                break
            data += chunk
    return data


def test_real_openssh_client_through_the_written_entry(devsy, running_workspace):
    config = str(devsy.ssh_config)
    host = f"{running_workspace}.devsy"
    # A "secret" that is the agent's SSH banner: any filter on the ProxyCommand stream would break the handshake.
    env = cli_env(devsy, DEVSY_REDACT="SSH-2.0-paramiko")
    result = subprocess.run(["ssh", "-F", config, host, "echo hi; id -un"], capture_output=True, timeout=60,
                            stdin=subprocess.DEVNULL, env=env)
    assert (result.returncode, result.stdout) == (0, b"hi\ndev\n"), result.stderr
    assert result.stderr == b""  # no host key warnings, no prompts
    data = os.urandom(256 * 1024)
    piped = subprocess.run(["ssh", "-F", config, host, "sha256sum; exit 9"], input=data, capture_output=True,
                           timeout=60, env=env)
    assert piped.returncode == 9
    assert piped.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()


def test_64_mib_each_way(devsy, running_workspace):
    data = random.Random(64).randbytes(64 * MIB)
    up = ssh(devsy, running_workspace, "sha256sum", input=data, timeout=300)
    assert up.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()
    generate = "python3 -c 'import random,sys; sys.stdout.buffer.write(random.Random(64).randbytes(64 << 20))'"
    down = ssh(devsy, running_workspace, generate, timeout=300)
    assert down.returncode == 0 and len(down.stdout) == len(data)
    assert hashlib.sha256(down.stdout).digest() == hashlib.sha256(data).digest()


def test_missing_agent_is_delivered_again_transparently(devsy, running_workspace, docker_client):
    container = docker_client.containers.list(filters={"label": f"dev.devsy.workspace={running_workspace}"})[0]
    assert container.exec_run(["sh", "-c", "rm -f /usr/local/lib/devsy/agent-*.pyz"], user="0").exit_code == 0
    result = subprocess.run(["ssh", "-F", str(devsy.ssh_config), f"{running_workspace}.devsy", "echo back"],
                            capture_output=True, timeout=120, stdin=subprocess.DEVNULL, env=cli_env(devsy))
    assert result.stdout == b"back\n", result.stderr


def test_stopped_workspace_is_a_clear_error(devsy, running_workspace):
    assert devsy.run("stop", running_workspace).returncode == 0
    result = ssh(devsy, running_workspace, "true")
    assert result.returncode != 0 and b"is stopped" in result.stderr
