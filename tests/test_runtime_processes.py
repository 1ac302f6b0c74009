"""Process-level guarantees of the supervisor and transport, with real processes and real signals."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from devsy.driver.base import ExecRequest, RunOptions
from devsy.errors import DevsyError
from devsy.runtime.wire.constants import COOKIE_KEY, COOKIE_VALUE
from devsy.runtime.wire.errors import ProviderExited, ProviderUnavailable
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.host.plugin_client import PluginClient
from devsy.runtime.host.testing import fake_command, running

TEARDOWN_S = 5.0


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Pids still alive (not even a zombie) after `timeout` seconds; polls, as non-children cannot be waited for."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in pids if not _gone(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _group(pgid: int) -> list[int]:
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and not _gone(proc.pid):
                members.append(proc.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def _provider_pid(plugin: PluginClient) -> int:
    (provider,) = psutil.Process(plugin.provider.process.pid).children()
    return provider.pid


def test_a_provider_crash_mid_exec_is_unavailable_and_leaves_no_process(tmp_path: Path) -> None:
    with running(fake_command(tmp_path)) as p:
        p.client.run_image("ws", RunOptions(image="img"))
    with running(fake_command(tmp_path, "--mode", "exec-crash")) as p:
        provider = _provider_pid(p.plugin)
        stdin_r, stdin_w = os.pipe()
        seen: list[list[int]] = []

        class Observer(io.RawIOBase):
            def write(self, data) -> int:
                if not seen:  # the command runs and has a child: look at the tree, then let the provider crash
                    seen.append(_group(provider))
                    os.write(stdin_w, b"go")
                return len(data)

        with pytest.raises(ProviderUnavailable, match="became unavailable during Exec"):
            p.client.exec("ws", ExecRequest(argv=["cat"], stdout=Observer(), stderr=io.BytesIO(),
                                            stdin=os.fdopen(stdin_r, "rb", buffering=0)))
        os.close(stdin_w)
        assert len(seen[0]) >= 2, f"expected the provider and its child in the group, saw {seen[0]}"
        assert wait_gone(seen[0], TEARDOWN_S) == []
        assert p.plugin.provider.exit_code(wait=TEARDOWN_S) == 1  # the supervisor saw a crash


_HOST = """
import io, json, sys
from pathlib import Path
from devsy.driver.base import ExecRequest, RunOptions
from devsy.runtime.host.testing import fake_command, running
with running(fake_command(Path(sys.argv[1]))) as p:
    p.client.run_image("ws", RunOptions(image="img"))
    out = io.BytesIO()
    p.client.exec("ws", ExecRequest(argv=["spawn-tree"], stdout=out, stderr=io.BytesIO()))
    pids = dict(field.split("=") for field in out.getvalue().decode().split())
    print(json.dumps({"supervisor": p.plugin.provider.process.pid, **{k: int(v) for k, v in pids.items()}}), flush=True)
    sys.stdin.read()
"""


def test_sigkill_of_the_host_tears_down_provider_and_descendants_but_not_a_setsid_one(tmp_path: Path) -> None:
    host = subprocess.Popen([sys.executable, "-c", _HOST, str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    detached = None
    try:
        pids = json.loads(host.stdout.readline())
        detached = pids["detached"]
        (provider,) = psutil.Process(pids["supervisor"]).children()
        doomed = [pids["supervisor"], provider.pid, pids["child"]]
        assert wait_gone(doomed + [detached], 0) == doomed + [detached]  # all alive before the kill
        host.kill()
        host.wait()
        assert wait_gone(doomed, TEARDOWN_S) == [], "the provider's tree outlived its host by more than 5 s"
        assert not _gone(detached), "the setsid'd descendant was killed with the provider's group"
    finally:
        host.kill()
        host.wait()
        host.stdin.close()
        host.stdout.close()
        if detached is not None and not _gone(detached):
            os.kill(detached, signal.SIGKILL)


def test_sigkill_of_the_supervisor_ends_the_provider_and_the_host_call_fails(tmp_path: Path) -> None:
    with running(fake_command(tmp_path)) as p:
        p.client.run_image("ws", RunOptions(image="img"))
        provider = _provider_pid(p.plugin)
        p.plugin.provider.process.kill()  # the supervisor, SIGKILLed: it cannot tear anything down itself
        p.plugin.provider.process.wait()
        assert wait_gone([provider], TEARDOWN_S) == [], "the provider served on without its supervisor"
        with pytest.raises(ProviderUnavailable):
            p.client.find("ws")


def test_stale_env_cannot_override_the_cookie_or_the_socket_dir(tmp_path: Path, monkeypatch) -> None:
    stale = tmp_path / "stale"
    stale.mkdir()
    stale_env = {COOKIE_KEY: "stale-cookie", "PLUGIN_UNIX_SOCKET_DIR": str(stale),
                 "PLUGIN_PROTOCOL_VERSIONS": "9", "PLUGIN_CLIENT_CERT": "stale-cert"}
    for key, value in stale_env.items():
        monkeypatch.setenv(key, value)  # inherited by the host's children ...
    command = fake_command(tmp_path / "state", env=stale_env)  # ... and set again as the provider's user env
    with running(command) as p:
        assert p.client.info().driver_name == "fake"
        address = Path(p.plugin.line.address)
        assert stale not in address.parents and not any(stale.iterdir())
        env = psutil.Process(_provider_pid(p.plugin)).environ()
        assert env[COOKIE_KEY] == COOKIE_VALUE and env["PLUGIN_PROTOCOL_VERSIONS"] == "1"
        assert Path(env["PLUGIN_UNIX_SOCKET_DIR"]) in address.parents
        assert "PLUGIN_CLIENT_CERT" not in env


SECRET_ENV = "env-secret-4f1d9c"
SECRET_ARG = "arg-secret-77ab02"


def test_secrets_in_env_or_argv_appear_in_no_diagnostic(tmp_path: Path) -> None:
    leaky = tmp_path / "leaky-provider"
    leaky.write_text('#!/bin/sh\necho "starting with $* and $API_TOKEN" >&2\necho "$*|$API_TOKEN"\nexit 3\n')
    leaky.chmod(0o755)
    with pytest.raises(DevsyError) as info:  # it prints its secrets as a "handshake line" and on stderr
        PluginClient.launch(ProviderCommand(binary=str(leaky), args=[f"--token={SECRET_ARG}"],
                                            env={"API_TOKEN": SECRET_ENV}))
    text = str(info.value)
    assert "starting with" in text or "handshake" in text
    assert SECRET_ENV not in text and SECRET_ARG not in text

    command = fake_command(tmp_path / "state", "--mode", "crash-before-handshake", env={"API_TOKEN": SECRET_ENV})
    with pytest.raises(ProviderExited) as info:
        PluginClient.launch(command)
    assert SECRET_ENV not in str(info.value)

    with running(fake_command(tmp_path / "state", env={"API_TOKEN": SECRET_ENV})) as p:
        supervisor = psutil.Process(p.plugin.provider.process.pid)
        assert SECRET_ENV not in " ".join(supervisor.cmdline()), "provider config leaked onto the supervisor's argv"
        assert SECRET_ENV not in supervisor.environ().values(), "provider env leaked into the supervisor's env"
        p.client.run_image("ws", RunOptions(image="img", env={"DB_PASSWORD": SECRET_ENV}))
        p.client.stop("ws")
        with pytest.raises(DevsyError) as info:  # exec in a stopped workspace fails; argv and env stay secret
            p.client.exec("ws", ExecRequest(argv=["echo", SECRET_ARG], stdout=io.BytesIO(), stderr=io.BytesIO(),
                                            env={"TOKEN": SECRET_ENV}))
        assert SECRET_ARG not in str(info.value) and SECRET_ENV not in str(info.value)
        state = next((tmp_path / "state").glob("*.json")).read_text()
        assert SECRET_ENV not in state, "env values were written to the fake runtime's state"
        assert SECRET_ENV not in p.plugin.provider.stderr_tail() and SECRET_ARG not in p.plugin.provider.stderr_tail()


def test_the_supervisor_starts_the_provider_before_its_heavier_imports() -> None:
    """It imports process_tree (dataclasses, pathlib) only to tear down, not before every provider launch; observed
    as what importing it loads, not timed."""
    probe = ("import sys\nimport devsy.runtime.host.supervisor\n"
             "print(sorted(m for m in ('dataclasses', 'devsy.process_tree', 'typing') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
