"""`devsy exec` through the workspace's SSH master (an argv@devsy session) on the real engine: the same bytes, exit
codes and environment as the driver's exec (DEVSY_SSH_MUX=0), remoteEnv computed by the master from the caller's
environment, and the cases that must take the driver's exec."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import subprocess
from pathlib import Path

import pytest

from helpers.cli import DEVSY, HOST_NET, DevsyCli, cli_env, imported_modules
from helpers.projects import make_project
from helpers.terminal import job_shell
from fixtures.process_observer import ProcessObserver

from devsy.agent.guest.channel_requests import parse_argv_request
from devsy.ssh.mux.processes import masters_under

DRIVER = {"DEVSY_SSH_MUX": "0"}
NOT_UTF8 = os.fsdecode(b"caf\xe9 \xff")  # bytes that are not UTF-8 must reach the command exactly


def _masters(devsy: DevsyCli) -> list[int]:
    return [process.pid for process, _ in masters_under(devsy.home)]


def _both(devsy: DevsyCli, *args: str, **env: str):
    """`devsy ARGS` through the master, then through the driver's exec."""
    return devsy.run(*args, extra_env=env or None), devsy.run(*args, extra_env={**DRIVER, **env})


PROFILE = {"PYTHONPROFILEIMPORTTIME": "1"}
DRIVER_MODULES = {"devsy.driver.docker.driver", "docker"}  # what this process imports to run a driver exec itself


@pytest.mark.parametrize("workspace", ["running_workspace", "exec_workspace"], ids=["agent", "no-agent"])
@pytest.mark.parametrize("flags, command", [
    ((), ("sh", "-c", "env | LC_ALL=C sort")),
    ((), ("sh", "-c", "pwd; id; umask")),
    ((), ("printf", "%s|", "a b", "$HOME", "*", "")),
    (("-w", "/tmp"), ("pwd",)),
    (("-u", "root"), ("sh", "-c", "id -un; echo $HOME")),
    (("-e", "FOO=bar baz", "-e", "HOME=/elsewhere"), ("sh", "-c", 'echo "$FOO|$HOME"')),
], ids=["env", "pwd-id", "argv-bytes", "workdir", "user", "env-option"])
def test_the_master_path_gives_what_the_driver_exec_gives(request, devsy: DevsyCli, workspace: str, flags,
                                                          command) -> None:
    """Through the agent, or (a guest without python3) through the master's own driver exec."""
    ws = request.getfixturevalue(workspace)
    through_master, through_driver = _both(devsy, "exec", *flags, ws, "--", *command)
    assert through_master.returncode == 0, through_master.text
    assert (through_master.returncode, through_master.stdout, through_master.stderr) == \
        (through_driver.returncode, through_driver.stdout, through_driver.stderr)
    assert _masters(devsy), "the first path did not go through an SSH master"


def test_the_command_is_the_agents_child(devsy: DevsyCli, running_workspace: str) -> None:
    """The parity cases above would pass on the driver's exec too: this one shows the master path ran them."""
    parent = 'tr "\\0" " " < /proc/$PPID/cmdline'
    through_master, through_driver = _both(devsy, "exec", running_workspace, "--", "sh", "-c", parent)
    assert b"python3" in through_master.stdout and b"ssh-server" in through_master.stdout, through_master.text
    assert b"ssh-server" not in through_driver.stdout, through_driver.text


def test_a_numeric_remote_user_takes_the_masters_driver_exec(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                             tmp_path: Path) -> None:
    """A remoteUser that is a uid without a passwd entry: the engine runs as it, the agent could not. The master
    runs the driver's exec (mux/driver_session.py): this process loads no driver."""
    devsy.up(make_project(tmp_path / "uid-user", {"image": guest_image, "remoteUser": "4321"}), "--id", ws_id,
             *HOST_NET)
    result = devsy.run("exec", ws_id, "--", "id", "-u", extra_env=PROFILE)
    assert (result.returncode, result.stdout) == (0, b"4321\n"), result.text
    assert not DRIVER_MODULES & imported_modules(result.stderr) and _masters(devsy)


def test_without_an_agent_the_client_loads_no_driver(devsy: DevsyCli, exec_workspace: str) -> None:
    """The parity cases above would pass with the client's own driver exec too (the master once answered `direct`):
    this one shows the master ran them. Stdin, stdout and stderr are the client's, byte for byte."""
    data = os.urandom(3 << 20) + bytes(range(256))
    result = devsy.run("exec", exec_workspace, "--", "sh", "-c", "sha256sum; echo err >&2; exit 3", input=data,
                       extra_env=PROFILE)
    assert result.returncode == 3, result.text
    assert result.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()
    assert b"\nerr\n" in b"\n" + result.stderr
    assert not DRIVER_MODULES & imported_modules(result.stderr) and _masters(devsy)
    assert "devsy.ssh.mux.client" in imported_modules(result.stderr)  # the profile did cover the command


def test_without_an_agent_what_cannot_start_exits_as_the_driver_exec_says(devsy: DevsyCli,
                                                                          exec_workspace: str) -> None:
    for args in (["-w", "/no/such/dir", exec_workspace, "true"], [exec_workspace, "no-such-command"],
                 [exec_workspace, "sh", "-c", "kill -TERM $$"], [exec_workspace, "sh", "-c", "exit 7"]):
        through_master, through_driver = _both(devsy, "exec", *args)
        assert (through_master.returncode, through_master.stdout, through_master.stderr) == \
            (through_driver.returncode, through_driver.stdout, through_driver.stderr), \
            (args, through_master.text, through_driver.text)
        assert through_master.returncode != 0, args


def test_argv_bytes_that_are_not_utf8_arrive_exactly(devsy: DevsyCli, running_workspace: str) -> None:
    # The driver's exec cannot do this one: the engine API takes the argv as JSON text.
    result = devsy.run("exec", running_workspace, "--", "printf", "%s|", NOT_UTF8)
    assert (result.returncode, result.stdout) == (0, b"caf\xe9 \xff|"), result.text


def test_what_cannot_start_exits_as_a_shell_says(devsy: DevsyCli, running_workspace: str) -> None:
    for args, code in ((["-w", "/no/such/dir", running_workspace, "true"], 126),
                       ([running_workspace, "no-such-command"], 127),
                       (["-u", "no-such-user", running_workspace, "true"], 126),
                       ([running_workspace, "sh", "-c", "kill -TERM $$"], 128 + 15),
                       ([running_workspace, "sh", "-c", "exit 7"], 7)):
        through_master, through_driver = _both(devsy, "exec", *args)
        assert through_master.returncode == through_driver.returncode == code, (args, through_master.text,
                                                                                through_driver.text)
        if code in (126, 127):
            assert through_master.stderr.strip(), args  # it says why


def test_stdin_reaches_the_command_byte_for_byte(devsy: DevsyCli, running_workspace: str) -> None:
    data = bytes(range(256)) * 4096
    result = devsy.run("exec", running_workspace, "--", "sha256sum", input=data)
    assert result.returncode == 0, result.text
    assert result.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()


def test_a_user_the_engine_reads_differently_takes_the_driver_exec(devsy: DevsyCli, running_workspace: str) -> None:
    # USER:GROUP and a uid without a passwd entry are the engine's forms, which the agent does not take.
    assert devsy.run("exec", "-u", "0:0", running_workspace, "--", "id", "-u").stdout == b"0\n"
    result = devsy.run("exec", "-u", "4321", running_workspace, "--", "id", "-u")
    assert (result.returncode, result.stdout) == (0, b"4321\n"), result.text
    assert _masters(devsy) == []


def test_remote_env_comes_from_each_callers_environment(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                        tmp_path: Path) -> None:
    """${localEnv:...} in remoteEnv is the calling process's, not that of the one that started the master."""
    project = make_project(tmp_path / "local-env", {"image": guest_image,
                                                    "remoteEnv": {"CALLER": "${localEnv:DEVSY_TEST_CALLER}"}})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    for value in ("first-caller", "second-caller"):
        for argv in (["exec", ws_id, "--", "sh", "-c", 'echo "$CALLER"'],
                     ["ssh", ws_id, "--command", 'echo "$CALLER"']):
            result = devsy.run(*argv, extra_env={"DEVSY_TEST_CALLER": value})
            assert (result.returncode, result.stdout) == (0, f"{value}\n".encode()), (argv, result.text)
    assert len(_masters(devsy)) == 1


def test_the_masters_warning_is_masked_with_the_sessions_secrets(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                 tmp_path: Path) -> None:
    project = make_project(tmp_path / "warned-project", {"image": guest_image})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert devsy.run("exec", ws_id, "true").returncode == 0  # a master, started without DEVSY_REDACT
    (project / ".devcontainer" / "devcontainer.json").write_text('{"image": ')
    # An --env value is a secret only the master is told of: this process never registers it.
    result = devsy.run("exec", "-e", "TOKEN=warned-project", ws_id, "true")
    assert result.returncode == 0, result.text
    assert "remoteEnv is not applied to this session" in result.text
    assert "warned-project" not in result.text and "***" in result.text, result.text


@pytest.mark.parametrize("payload", [b"", b"[]", b'{"argv": []}', b'{"argv": "ls"}', b'{"argv": ["ls", 1]}',
                                     b'{"argv": ["ls"], "workdir": 3}', b"\xff"])
def test_a_malformed_argv_request_is_refused(payload: bytes) -> None:
    with pytest.raises(ValueError):
        parse_argv_request(payload)


def test_an_argv_request_keeps_every_byte() -> None:
    payload = json.dumps({"argv": ["printf", NOT_UTF8], "workdir": "/w"}).encode()
    assert parse_argv_request(payload) == (["printf", NOT_UTF8], "/w")


@pytest.mark.parametrize("mux_env", [{}, DRIVER], ids=["master", "driver"])
def test_nohup_devsy_exec_outlives_its_terminal(devsy: DevsyCli, running_workspace: str, mux_env) -> None:
    """SIGHUP inherited as ignored (`nohup devsy exec ...`) stays ignored: the hang-up cancels nothing. Without
    nohup the same signal stops the command (test_faults_orphans)."""
    command = ["sh", "-c", "echo started; read line; echo finished-$line"]
    nohup = ["sh", "-c", 'trap "" HUP; exec "$@"', "nohup"]  # what nohup does, without its output redirection
    proc = subprocess.Popen([*nohup, *DEVSY, "exec", running_workspace, "--", *command], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(devsy, **mux_env))
    try:
        assert proc.stdout.readline() == b"started\n", proc.stderr.read1()
        proc.send_signal(signal.SIGHUP)  # the terminal went away; devsy was told to ignore that
        out, err = proc.communicate(b"42\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out) == (0, b"finished-42\n"), err
    assert bool(_masters(devsy)) == (not mux_env), "the session did not take the path it is named for"


@pytest.mark.parametrize("workspace", ["running_workspace", "exec_workspace"], ids=["agent", "no-agent"])
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("mux_env", [{}, DRIVER], ids=["master", "driver"])
def test_output_whose_reader_is_gone_ends_like_a_pipeline(request, devsy: DevsyCli, workspace: str, mux_env,
                                                          stream: str) -> None:
    """`devsy exec WS yes | head -1` exits 141 (128 + SIGPIPE) on either path, as `yes | head -1` does; the driver
    path once said 130, a Ctrl-C's status. The command ends too: the pipeline returns."""
    ws = request.getfixturevalue(workspace)
    redirect = "" if stream == "stdout" else ">&2"
    piped = "" if stream == "stdout" else "2>&1 >/dev/null"
    result = subprocess.run(["bash", "-c", f"{' '.join(DEVSY)} exec {ws} -- sh -c 'yes {redirect}' "
                                           f"{piped} | head -1; echo \"status ${{PIPESTATUS[0]}}\""],
                            capture_output=True, timeout=60, env=cli_env(devsy, **mux_env))
    assert result.stdout == b"y\nstatus 141\n", result
    assert bool(_masters(devsy)) == (not mux_env), "the session did not take the path it is named for"


def test_an_environment_too_large_for_the_master_takes_the_driver_exec(devsy: DevsyCli,
                                                                       running_workspace: str) -> None:
    """The master reads at most 1 MiB per message, and a session message carries the caller's environment (for
    `${localEnv:...}`): a larger one takes the driver's exec rather than losing the master twice."""
    big = {f"DEVSY_TEST_BIG_{i}": "x" * 120_000 for i in range(10)}  # 1.2 MB; each under Linux's 128 KiB per string
    result = devsy.run("exec", running_workspace, "--", "echo", "ran", extra_env=big)
    assert (result.returncode, result.stdout) == (0, b"ran\n"), result.text


def test_env_values_and_commands_that_are_not_utf8_arrive_exactly(devsy: DevsyCli, running_workspace: str) -> None:
    # The engine API takes JSON text, so the driver's exec cannot do this; the agent's session can.
    result = devsy.run("exec", "-e", f"A={NOT_UTF8}", running_workspace, "--", "sh", "-c", 'printf %s "$A"')
    assert (result.returncode, result.stdout) == (0, b"caf\xe9 \xff"), result.text
    result = devsy.run("ssh", running_workspace, "--command", f"printf %s '{NOT_UTF8}'")
    assert (result.returncode, result.stdout) == (0, b"caf\xe9 \xff"), result.text


def test_stop_ends_a_session_the_masters_driver_runs_and_says_why(devsy: DevsyCli, exec_workspace: str) -> None:
    """`devsy stop` asks the master to exit: a `devsy exec` its driver runs is cancelled (its tree killed), and the
    client says what ended it, as a session on the agent's connection does (test_faults_ssh)."""
    proc = subprocess.Popen([*DEVSY, "exec", exec_workspace, "--", "sh", "-c", "echo started; exec sleep 300"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=cli_env(devsy))
    try:
        assert proc.stdout.readline() == b"started\n", proc.stderr.read1()
        stopped = devsy.run("stop", exec_workspace)
        assert stopped.returncode == 0, stopped.text
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert f"the session in workspace {exec_workspace} was ended by `devsy stop {exec_workspace}`".encode() in err, err
    assert _masters(devsy) == []


@pytest.mark.parametrize("mux_env", [{}, DRIVER], ids=["master", "driver"])
def test_a_command_started_with_stdin_closed_runs_with_empty_input(devsy: DevsyCli, exec_workspace: str,
                                                                   mux_env) -> None:
    """`devsy exec WS cat <&-`: no stdin at all is empty input on either path (the driver path once crashed)."""
    result = subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", *DEVSY, "exec", exec_workspace, "--", "sh", "-c",
                             "cat; echo done"], capture_output=True, timeout=60, env=cli_env(devsy, **mux_env))
    assert (result.returncode, result.stdout) == (0, b"done\n"), result


@pytest.mark.parametrize("workspace", ["running_workspace", "exec_workspace"], ids=["agent", "no-agent"])
@pytest.mark.parametrize("mux_env", [{}, DRIVER], ids=["master", "driver"])
def test_a_background_job_reading_its_terminal_is_stopped_until_brought_to_the_foreground(
        request, devsy: DevsyCli, workspace: str, mux_env) -> None:
    """`devsy exec WS -- cmd &` reading the terminal stops (SIGTTIN), as the driver's path and OpenSSH do: the master
    once read the terminal itself, taking what the user typed at their shell. In the foreground it reads it."""
    ws = request.getfixturevalue(workspace)
    with job_shell("fg", [*DEVSY, "exec", ws, "--", "tr", "a-z", "A-Z"], cli_env(devsy, **mux_env)) as term:
        term.type("typed at the shell\n")
        assert term.expect(b"stopped by SIGTTIN", timeout=60), term.output
        assert b"TYPED" not in term.output, term.output
        term.type("\x04")  # end of input, once the job has the terminal
        assert term.expect(b"job exit 0", timeout=60), term.output
        assert term.output.index(b"stopped by SIGTTIN") < term.output.index(b"TYPED AT THE SHELL"), term.output
        assert term.wait() == 0
    assert bool(_masters(devsy)) == (not mux_env), "the session did not take the path it is named for"


@pytest.mark.parametrize("workspace", ["running_workspace", "exec_workspace"], ids=["agent", "no-agent"])
@pytest.mark.parametrize("mux_env", [{}, DRIVER], ids=["master", "driver"])
def test_kill_ends_a_background_job_stopped_for_reading_its_terminal(request, devsy: DevsyCli, workspace: str,
                                                                      mux_env) -> None:
    """`kill %N` on a job stopped by SIGTTIN (SIGTERM, then SIGCONT, the job still in the background) ends it as
    SIGTERM ends `devsy exec`, guest command included. A read of the terminal, restarted by the kernel as the job
    continued, once stopped it again before it could act on the signal: `kill %N` never ended it."""
    _kill_a_stopped_job(devsy, request.getfixturevalue(workspace), mux_env, [])


def test_kill_ends_a_stopped_background_job_a_script_runs(devsy: DevsyCli, exec_workspace: str) -> None:
    """The job is a script that runs devsy (devsy's parent is in the job's group, the shell outside it): the group
    is not orphaned, so devsy stops it itself as in the test above. The script outlives SIGTERM (a trap), so the
    job ends only if devsy does."""
    _kill_a_stopped_job(devsy, exec_workspace, {}, ["sh", "-c", 'trap : TERM; "$@"; exit $?', "sh"])


def _kill_a_stopped_job(devsy: DevsyCli, ws: str, mux_env: dict[str, str], wrapper: list[str]) -> None:
    nonce = f"bg-kill-{secrets.token_hex(4)}"
    with job_shell("kill", [*wrapper, *DEVSY, "exec", ws, "--", "sh", "-c", f'echo "pid $$ ."; tr a-z A-Z; : {nonce}'],
                    cli_env(devsy, **mux_env)) as term:
        assert term.expect(b" .\r\n", timeout=60), term.output  # the whole line: not the job's line's end
        guest_pid = int(re.search(rb"pid (\d+) \.\r\n", term.output)[1])
        observer = ProcessObserver.via_devsy(DEVSY, ws, env=cli_env(devsy, **mux_env))
        guest = observer.identify(guest_pid, nonce)
        term.type("typed at the shell\n")
        assert term.expect(b"stopped by SIGTTIN", timeout=60), term.output
        term.type("kill\n")
        assert term.expect(f"job exit {128 + signal.SIGTERM}".encode(), timeout=60), term.output
        assert b"TYPED" not in term.output, term.output
        assert term.wait() == 0
    assert observer.wait_dead([guest], timeout=30) == [], "the guest command outlived the job"
    assert bool(_masters(devsy)) == (not mux_env), "the session did not take the path it is named for"
