"""RPCs that reach a provider before its services are loaded (just after the handshake line) wait for them and get
exactly the answer a later call gets, whatever the method's shape; a failed load or an unknown method is named.

A real gRPC server on a unix socket in this process serves the fake runtime's RuntimeService through
DeferredServices, as serve_plugin does; the services are held back until every early call is seen waiting (a
subclass says when one arrives), then loaded.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from devsy.driver.base import RunOptions
from devsy.runtime.fake.driver import FakeDriver
from devsy.runtime.fake.state import StateStore
from devsy.runtime.sdk.deferred import DeferredServices
from devsy.runtime.sdk.info import ProviderInfo
from devsy.runtime.sdk.service import RuntimeService
from devsy.runtime.v1 import runtime_pb2 as pb
from devsy.runtime.v1 import runtime_pb2_grpc

WAIT_S = 120.0  # generous bounds: the machine may be busy


class _Watched(DeferredServices):
    """DeferredServices that counts the calls waiting for the load."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Semaphore(0)

    def _when_loaded(self, details: Any, requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        self.waiting.release()
        yield from super()._when_loaded(details, requests, context)


class _Served:
    def __init__(self, state_dir: Path) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="dpd-"))
        self.services = _Watched()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self.server.add_generic_rpc_handlers((self.services,))
        self.server.add_insecure_port(f"unix:{self.directory / 's'}")
        self.server.start()
        self.channel = grpc.insecure_channel(f"unix:{self.directory / 's'}")
        self.stub = runtime_pb2_grpc.RuntimeDriverStub(self.channel)
        self.servicer = RuntimeService(FakeDriver(StateStore(state_dir)),
                                       ProviderInfo(driver_name="fake", driver_version="1", runtime_name="fake"))

    def register(self, server: Any) -> None:
        runtime_pb2_grpc.add_RuntimeDriverServicer_to_server(self.servicer, server)

    def close(self) -> None:
        self.channel.close()
        self.server.stop(None).wait(WAIT_S)
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[_Served]:
    served = _Served(tmp_path / "state")
    yield served
    served.close()


def _outcome(call: Callable[[], Any]) -> Any:
    """A call's result, or (code, details, trailing RuntimeError bytes) when it failed."""
    try:
        result = call()
        return [m.SerializeToString() for m in result] if not hasattr(result, "SerializeToString") \
            else result.SerializeToString()
    except grpc.RpcError as exc:
        trailers = {key: value for key, value in (exc.trailing_metadata() or ()) if key.endswith("-bin")}
        return exc.code(), exc.details(), trailers


def _calls(stub: runtime_pb2_grpc.RuntimeDriverStub, ws: str) -> dict[str, Callable[[], Any]]:
    """One call of each shape: unary (ok and failing), server streaming (Logs), bidi streaming (Exec)."""
    frames = [pb.ExecClientMessage(start=pb.ExecStart(workspace_id=ws, argv=["echo", "early"])),
              pb.ExecClientMessage(close_stdin=pb.CloseStdin())]
    return {
        "Info": lambda: stub.Info(pb.InfoRequest(supports_recreate_on_run=True), timeout=WAIT_S),
        "Find": lambda: stub.Find(pb.FindRequest(workspace_id=ws), timeout=WAIT_S),
        "Delete": lambda: stub.Delete(pb.DeleteRequest(workspace_id="bad id\n"), timeout=WAIT_S),
        "Logs": lambda: list(stub.Logs(pb.LogsRequest(workspace_id=ws), timeout=WAIT_S)),
        "Exec": lambda: list(stub.Exec(iter(frames), timeout=WAIT_S)),
    }


def test_an_exec_with_stdin_made_before_the_load_streams_both_ways(served: _Served, tmp_path: Path) -> None:
    FakeDriver(StateStore(tmp_path / "state")).run("early-ws", RunOptions(image="img"))  # a fresh process sees it
    payload = [b"first chunk\n", b"x" * 40000, b"last\n"]
    frames = [pb.ExecClientMessage(start=pb.ExecStart(workspace_id="early-ws", argv=["cat"])),
              *(pb.ExecClientMessage(stdin=chunk) for chunk in payload),
              pb.ExecClientMessage(close_stdin=pb.CloseStdin())]
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(list(served.stub.Exec(iter(frames), timeout=WAIT_S))))
    thread.start()
    assert served.services.waiting.acquire(timeout=WAIT_S)
    assert served.services.load(served.register)
    thread.join(WAIT_S)
    assert result, "the early Exec did not finish"
    stdout = b"".join(m.stdout.data for m in result[0] if m.WhichOneof("payload") == "stdout")
    exits = [m.exit for m in result[0] if m.WhichOneof("payload") == "exit"]
    assert stdout == b"".join(payload)
    assert [e.exit_code for e in exits] == [0]


def test_calls_made_before_the_load_get_what_calls_after_it_get(served: _Served) -> None:
    early: dict[str, Any] = {}
    calls = _calls(served.stub, "absent-ws")
    threads = [threading.Thread(target=lambda n=name, c=call: early.__setitem__(n, _outcome(c)))
               for name, call in calls.items()]
    for thread in threads:
        thread.start()
    for name in calls:
        assert served.services.waiting.acquire(timeout=WAIT_S), f"only some early calls arrived (waiting for {name})"
    assert served.services.load(served.register)
    for thread in threads:
        thread.join(WAIT_S)
    assert set(early) == set(calls), "an early call did not finish"
    later = {name: _outcome(call) for name, call in calls.items()}
    assert early == later
    # They are real answers, not all the same failure: Info and Find answer, the others fail as the fake does.
    assert pb.InfoResponse.FromString(early["Info"]).driver_name == "fake"
    assert not pb.FindResponse.FromString(early["Find"]).found
    assert early["Delete"][0] == grpc.StatusCode.INVALID_ARGUMENT
    assert early["Exec"][0] == grpc.StatusCode.NOT_FOUND


def test_an_unknown_method_made_before_the_load_is_unimplemented(served: _Served) -> None:
    unknown = served.channel.unary_unary("/devsy.runtime.v1.RuntimeDriver/NoSuchMethod")
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(_outcome(lambda: unknown(b"", timeout=WAIT_S))))
    thread.start()
    assert served.services.waiting.acquire(timeout=WAIT_S)
    assert served.services.load(served.register)
    thread.join(WAIT_S)
    assert result and result[0][0] == grpc.StatusCode.UNIMPLEMENTED
    assert _outcome(lambda: unknown(b"", timeout=WAIT_S))[0] == grpc.StatusCode.UNIMPLEMENTED


def test_a_failed_load_is_unavailable_for_waiting_and_later_calls(served: _Served,
                                                                 capfd: pytest.CaptureFixture[str]) -> None:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(_outcome(_calls(served.stub, "ws")["Info"])))
    thread.start()
    assert served.services.waiting.acquire(timeout=WAIT_S)

    def broken(server: Any) -> None:
        raise ImportError("no module named backend_sdk")

    assert not served.services.load(broken)
    thread.join(WAIT_S)
    assert result and result[0][0] == grpc.StatusCode.UNAVAILABLE
    assert "failed while starting" in result[0][1]
    assert _outcome(_calls(served.stub, "ws")["Find"])[0] == grpc.StatusCode.UNAVAILABLE
    assert "no module named backend_sdk" in capfd.readouterr().err  # the traceback, as a crash at start-up shows it


def test_the_early_phase_answers_while_the_providers_own_load_still_runs(served: _Served) -> None:
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    def plumbing(server: Any) -> None:
        servicer = health.HealthServicer()
        servicer.set("plugin", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)

    health_stub = health_pb2_grpc.HealthStub(served.channel)
    check = lambda: health_stub.Check(health_pb2.HealthCheckRequest(service="plugin"), timeout=WAIT_S)  # noqa: E731
    early_health: list[Any] = []
    waiting = threading.Thread(target=lambda: early_health.append(check().status))
    waiting.start()
    assert served.services.waiting.acquire(timeout=WAIT_S)  # it arrived before either phase ran
    loading, release = threading.Event(), threading.Event()

    def slow_backend(server: Any) -> None:
        loading.set()
        assert release.wait(WAIT_S)
        served.register(server)

    loader = threading.Thread(target=lambda: served.services.load(slow_backend, early=plumbing))
    loader.start()
    try:
        assert loading.wait(WAIT_S)
        waiting.join(WAIT_S)
        assert early_health == [health_pb2.HealthCheckResponse.SERVING]  # the waiting call, served by the early phase
        assert check().status == health_pb2.HealthCheckResponse.SERVING  # and a new one, while the backend loads
        info: list[Any] = []
        pending = threading.Thread(target=lambda: info.append(_outcome(_calls(served.stub, "ws")["Info"])))
        pending.start()
        assert served.services.waiting.acquire(timeout=WAIT_S)  # the provider's own method still waits
        assert not info
    finally:
        release.set()
        loader.join(WAIT_S)
    pending.join(WAIT_S)
    assert pb.InfoResponse.FromString(info[0]).driver_name == "fake"
