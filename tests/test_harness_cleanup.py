"""The cleanup registry: reverse order, independent steps, not-found is done, a budget per step."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import docker.errors
import psutil
import pytest

from harness.cleanup import DONE, FAILED, KEPT, NOT_FOUND, TIMED_OUT, CleanupRegistry, NotFound


def test_steps_run_newest_first() -> None:
    order: list[str] = []
    registry = CleanupRegistry(default_budget=5)
    for name in ("network", "volume", "instance"):
        registry.add(name, lambda name=name: order.append(name))
    results = registry.run()
    assert order == ["instance", "volume", "network"]
    assert [r.status for r in results] == [DONE, DONE, DONE]
    assert registry.errors() == []


def test_a_failing_step_does_not_stop_the_others_and_every_error_is_collected() -> None:
    ran: list[str] = []
    registry = CleanupRegistry(default_budget=5)
    registry.add("first", lambda: ran.append("first"))
    registry.add("broken-a", lambda: (_ for _ in ()).throw(RuntimeError("engine said no")))
    registry.add("middle", lambda: ran.append("middle"))
    registry.add("broken-b", lambda: 1 / 0)
    registry.run()
    assert ran == ["middle", "first"]
    errors = registry.errors()
    assert len(errors) == 2
    assert errors[0].startswith("broken-b: failed: ZeroDivisionError")
    assert errors[1] == "broken-a: failed: RuntimeError: engine said no"


def test_not_found_counts_as_done() -> None:
    registry = CleanupRegistry(default_budget=5)

    def gone() -> None:
        raise NotFound("already removed")

    def docker_gone() -> None:
        raise docker.errors.NotFound("No such container")

    registry.add("harness", gone)
    registry.add("docker", docker_gone)
    registry.add_command("cli", [sys.executable, "-c", "import sys; print('workspace-not-found'); sys.exit(1)"],
                         not_found=lambda completed: b"workspace-not-found" in completed.stdout)
    assert [r.status for r in registry.run()] == [NOT_FOUND, NOT_FOUND, NOT_FOUND]
    assert registry.errors() == []


def test_a_hanging_step_is_cut_at_its_budget_and_the_remaining_steps_still_run() -> None:
    release = threading.Event()
    ran: list[str] = []
    registry = CleanupRegistry(default_budget=30)
    registry.add("older", lambda: ran.append("older"))
    registry.add("hangs", lambda: release.wait(120), budget=0.5)
    registry.add("newer", lambda: ran.append("newer"))
    started = time.monotonic()
    results = registry.run()
    elapsed = time.monotonic() - started
    release.set()
    assert ran == ["newer", "older"]
    assert [r.status for r in results] == [DONE, TIMED_OUT, DONE]
    assert 0.5 <= elapsed < 5, f"cleanup took {elapsed:.1f}s"
    assert registry.errors() == ["hangs: timed-out: still running at its budget of 0.5s; abandoned"]


def test_a_hanging_command_step_is_killed_with_its_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    # The step starts a grandchild that would outlive a plain kill of the direct child.
    script = (
        "import os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    registry = CleanupRegistry(default_budget=30)
    registry.add_command("hangs", [sys.executable, "-c", script], budget=1.5)
    ran: list[str] = []
    registry.add("newer", lambda: ran.append("newer"))
    started = time.monotonic()
    results = registry.run()
    assert time.monotonic() - started < 10
    assert ran == ["newer"]
    assert [r.status for r in results] == [DONE, TIMED_OUT]
    grandchild = int(pid_file.read_text())
    # SIGKILL is delivered asynchronously: allow the kernel a bounded moment to finish the grandchild off.
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a real condition with a deadline, not a synchronization guess
    assert not _alive(grandchild), "the step's grandchild survived the kill"
    assert registry.log.records[-1].timed_out


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_keep_records_every_step_as_kept_without_running_it() -> None:
    ran: list[str] = []
    registry = CleanupRegistry(default_budget=5)
    registry.add("instance", lambda: ran.append("instance"))
    registry.keep("--devsy-keep-on-failure")
    assert [(r.name, r.status) for r in registry.run()] == [("instance", KEPT)]
    assert ran == [] and registry.errors() == []


def test_cleanup_runs_once_and_refuses_late_registration() -> None:
    calls: list[int] = []
    registry = CleanupRegistry(default_budget=5)
    registry.add("once", lambda: calls.append(1))
    registry.run()
    registry.run()
    assert calls == [1]
    with pytest.raises(RuntimeError, match="after cleanup already ran"):
        registry.add("late", lambda: None)


def test_a_failed_command_step_reports_its_exit_and_output() -> None:
    registry = CleanupRegistry(default_budget=5)
    registry.add_command("delete", [sys.executable, "-c", "import sys; sys.stderr.write('engine down'); sys.exit(3)"])
    (result,) = registry.run()
    assert result.status == FAILED and result.error == "exit 3: engine down"
