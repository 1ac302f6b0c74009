"""devsy's deferred modules (asyncio and the asyncio halves of grpc): not imported by importing grpc, imported for
real by their first use, however that use reaches them. Each case runs in a fresh interpreter, since the deferral
happens once, when `devsy` is first imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

TIMEOUT_S = 120.0


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,  # noqa: S603
                          timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_grpc_and_its_health_and_status_helpers_after_devsy_loads_no_asyncio() -> None:
    out = _run("""
        import sys
        import devsy, grpc
        from grpc_health.v1 import health
        from grpc_status import rpc_status
        real = [m for m in ("asyncio", "grpc.aio", "grpc_health.v1._async", "grpc_status._async")
                if type(sys.modules.get(m)).__name__ == "module"]  # a deferred one is a DeferredModule
        print(real, "asyncio.base_events" in sys.modules)
    """)
    assert out == "[] False"


def test_the_first_use_imports_the_real_module_whichever_way_it_comes() -> None:
    out = _run("""
        import sys
        import devsy, grpc
        from grpc_health.v1 import health
        import asyncio
        async def answer():
            await asyncio.sleep(0)
            return 42
        print(asyncio.run(answer()))                              # an attribute of the deferred module
        print(type(sys.modules["asyncio"]).__name__)               # the real module took its place
        import asyncio.subprocess                                  # a submodule import through it
        from grpc.aio import insecure_channel                      # from-import of the deferred grpc.aio
        print(grpc.aio.insecure_channel is insecure_channel)       # grpc's own reference keeps working
        print(health.aio.HealthServicer.__module__)
    """)
    assert out.splitlines() == ["42", "module", "True", "grpc_health.v1._async"]


def test_nothing_is_deferred_when_grpc_came_first() -> None:
    out = _run("""
        import sys
        import grpc, devsy
        print(type(sys.modules["asyncio"]).__name__, type(sys.modules["grpc.aio"]).__name__)
    """)
    assert out == "module module"


def test_a_module_that_fails_to_import_fails_on_every_use() -> None:
    out = _run("""
        import sys
        from devsy.deferred_modules import DeferredModule
        sys.modules["devsy_absent_module"] = stand_in = DeferredModule("devsy_absent_module")
        for _ in range(2):
            try:
                stand_in.anything
            except ModuleNotFoundError as exc:
                print(exc.name, sys.modules["devsy_absent_module"] is stand_in)
    """)
    assert out.splitlines() == ["devsy_absent_module True"] * 2


def test_concurrent_first_uses_import_once() -> None:
    out = _run("""
        import sys, threading
        import devsy, grpc
        from concurrent.futures import ThreadPoolExecutor
        barrier = threading.Barrier(8)
        def first_use(_):
            import asyncio  # the deferred module, or the real one if another thread's first use came before
            barrier.wait()
            return id(asyncio.events)
        with ThreadPoolExecutor(8) as pool:
            print(len(set(pool.map(first_use, range(8)))))
    """)
    assert out == "1"

