"""The owned fixture HTTP server, driven over real loopback sockets on both address families."""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest
import requests

from devsy.bounded_wait import wait_until
from fixtures import artifact_server
from fixtures.artifact_server import THREAD_PREFIX, AccessRecord, ArtifactServer, ArtifactServerError, reachable_host

AGENT = os.urandom(64 * 1024)
RUNTIME = os.urandom(200 * 1024)


def fetch(method: str, url: str, **kwargs: object) -> requests.Response:
    """One request with a fresh session that ignores proxy settings, so traffic stays on loopback."""
    with requests.Session() as session:
        session.trust_env = False
        return session.request(method, url, timeout=10, **kwargs)  # type: ignore[arg-type]


def server_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Poll a real condition until it holds; fail with `what` after `timeout` seconds."""
    wait_until(condition, timeout=timeout, interval=0.01, what=what)


def address(server: ArtifactServer, family: str) -> tuple[str, int]:
    parts = urlsplit(server.url("/", family))  # type: ignore[arg-type]
    return str(parts.hostname), int(parts.port or 0)


def require_ipv6(server: ArtifactServer) -> None:
    if not server.ipv6_available:
        pytest.skip(f"this host has no ::1: {server.ipv6_error}")


def assert_refused(host: str, port: int) -> None:
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=5).close()


@pytest.fixture
def server() -> Iterator[ArtifactServer]:
    assert server_threads() == [], "a previous test leaked server threads"
    with ArtifactServer({"/agent": AGENT, "/runtime": RUNTIME}) as srv:
        yield srv
    assert server_threads() == []


def test_both_families_serve_the_same_bytes_and_share_counters(server: ArtifactServer) -> None:
    require_ipv6(server)
    assert server.url("/runtime").startswith("http://127.0.0.1:")
    assert server.url("/runtime", "ipv6").startswith("http://[::1]:")
    v4, v6 = fetch("GET", server.url("/runtime")), fetch("GET", server.url("/runtime", "ipv6"))
    assert (v4.status_code, v6.status_code) == (200, 200)
    assert v4.content == v6.content == RUNTIME
    assert v4.headers["Content-Length"] == str(len(RUNTIME))
    assert server.count("/runtime") == 2


def test_head_sends_content_length_and_no_body(server: ArtifactServer) -> None:
    # Raw socket: a client library would hide body bytes wrongly sent after a HEAD response.
    with socket.create_connection(address(server, "ipv4"), timeout=5) as conn:
        conn.sendall(b"HEAD /agent HTTP/1.0\r\n\r\n")
        raw = b"".join(iter(lambda: conn.recv(65536), b""))
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200")
    assert f"Content-Length: {len(AGENT)}".encode() in head.split(b"\r\n")
    assert body == b""
    assert server.count("/agent") == 1


def test_counts_are_per_route_and_exact_under_concurrency(server: ArtifactServer) -> None:
    families = ["ipv4", "ipv6"] if server.ipv6_available else ["ipv4"]
    plan = [("/agent", 30), ("/runtime", 12), ("/missing", 5)]
    jobs = [server.url(route, families[i % len(families)]) for route, n in plan for i in range(n)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(lambda url: fetch("GET", url).status_code, jobs))
    assert sorted(statuses) == [200] * 42 + [404] * 5
    assert server.counts() == {"/agent": 30, "/runtime": 12, "/missing": 5}
    snapshot = server.counts()
    snapshot["/agent"] = 0
    assert server.count("/agent") == 30, "counts() must be a copy, not the live counter"
    assert server.count("/never-asked") == 0


def test_offline_route_answers_404_and_is_counted_while_others_serve(server: ArtifactServer) -> None:
    server.set_offline("/runtime")
    families = ["ipv4", "ipv6"] if server.ipv6_available else ["ipv4"]
    for family in families:
        assert fetch("GET", server.url("/runtime", family)).status_code == 404
        assert fetch("HEAD", server.url("/runtime", family)).status_code == 404
        assert fetch("GET", server.url("/agent", family)).content == AGENT
    assert server.counts() == {"/runtime": 2 * len(families), "/agent": len(families)}
    server.set_offline("/runtime", False)
    assert fetch("GET", server.url("/runtime")).content == RUNTIME
    assert server.count("/runtime") == 2 * len(families) + 1
    with pytest.raises(ArtifactServerError, match="unknown route '/nope'"):
        server.set_offline("/nope")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_get_405_with_allow(server: ArtifactServer, method: str) -> None:
    # A body larger than one read buffer: the 405 must still arrive whole, not be cut off by a reset.
    response = fetch(method, server.url("/agent"), data=os.urandom(512 * 1024) if method in ("POST", "PUT") else None)
    assert response.status_code == 405
    assert response.headers["Allow"] == "GET, HEAD"
    assert server.count("/agent") == 1
    assert fetch("GET", server.url("/agent")).status_code == 200


def test_range_resumes_an_interrupted_download(server: ArtifactServer) -> None:
    url, expected = server.url("/runtime"), hashlib.sha256(RUNTIME).hexdigest()
    with requests.Session() as session:
        session.trust_env = False
        with session.get(url, stream=True, timeout=10) as interrupted:  # the client gives up part-way
            partial = interrupted.raw.read(50_000)
    assert len(partial) == 50_000
    rest = fetch("GET", url, headers={"Range": f"bytes={len(partial)}-"})
    assert rest.status_code == 206
    assert rest.headers["Content-Range"] == f"bytes 50000-{len(RUNTIME) - 1}/{len(RUNTIME)}"
    assert rest.headers["Content-Length"] == str(len(RUNTIME) - 50_000)
    assert hashlib.sha256(partial + rest.content).hexdigest() == expected
    window = fetch("GET", url, headers={"Range": "bytes=10-19"})
    assert (window.status_code, window.content) == (206, RUNTIME[10:20])
    past_end = fetch("GET", url, headers={"Range": f"bytes={len(RUNTIME)}-"})
    assert past_end.status_code == 416
    assert past_end.headers["Content-Range"] == f"bytes */{len(RUNTIME)}"
    assert server.count("/runtime") == 4


def test_stalled_client_is_dropped_by_the_request_timeout() -> None:
    with ArtifactServer({"/agent": AGENT}, request_timeout=0.5) as server:
        with socket.create_connection(address(server, "ipv4"), timeout=10) as stalled:
            started = time.monotonic()
            assert fetch("GET", server.url("/agent")).content == AGENT  # others are served meanwhile
            assert stalled.recv(1) == b"", "the server should close a connection that never sends a request"
            elapsed = time.monotonic() - started
        assert 0.4 <= elapsed < 5
        assert any("timed out" in line for line in server.errors), server.errors
    assert server_threads() == []


def test_stop_is_bounded_with_a_stalled_client_and_leaves_nothing() -> None:
    before = set(threading.enumerate())
    server = ArtifactServer({"/agent": AGENT}, request_timeout=120).start()
    families = ["ipv4", "ipv6"] if server.ipv6_available else ["ipv4"]
    addresses = [address(server, family) for family in families]
    assert fetch("GET", server.url("/agent")).status_code == 200
    stalled = socket.create_connection(addresses[0], timeout=10)
    try:
        # This very connection, not just any handler thread (the GET's may still be finishing): a connection still in
        # the accept backlog when the listener closes is reset by the kernel, not closed.
        peer = tuple(stalled.getsockname()[:2])
        wait_for(lambda: peer in server.open_peers(), "server accepted the stalled client")
        started = time.monotonic()
        server.stop(timeout=3)
        assert time.monotonic() - started < 3
        assert stalled.recv(1) == b"", "stop() should close the stalled connection"
    finally:
        stalled.close()
    assert server_threads() == []
    assert set(threading.enumerate()) == before
    for host, port in addresses:
        assert_refused(host, port)


def test_wildcard_addresses_are_normalized_to_loopback() -> None:
    # Only the normalization is checked: fixture servers here bind loopback alone (ENVIRONMENT.md), never 0.0.0.0.
    assert [reachable_host(h) for h in ("0.0.0.0", "", "::", "127.0.0.1", "::1")] == [
        "127.0.0.1", "127.0.0.1", "::1", "127.0.0.1", "::1"]


def test_missing_ipv6_is_reported_and_ipv4_still_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    real_bind = artifact_server._Listener.server_bind

    def bind_without_ipv6(listener: artifact_server._Listener) -> None:
        if listener.address_family == socket.AF_INET6:
            raise OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address")
        real_bind(listener)

    monkeypatch.setattr(artifact_server._Listener, "server_bind", bind_without_ipv6)
    with ArtifactServer({"/agent": AGENT}) as server:
        assert server.ipv6_available is False
        assert "Cannot assign requested address" in str(server.ipv6_error)
        with pytest.raises(ArtifactServerError, match="no 'ipv6' listener.*Cannot assign"):
            server.url("/agent", "ipv6")
        assert fetch("GET", server.url("/agent")).content == AGENT
    with ArtifactServer({"/agent": AGENT}, host_v6=None) as server:
        assert not server.ipv6_available and "disabled by the caller" in str(server.ipv6_error)
    assert server_threads() == []


def test_quiet_by_default_with_an_opt_in_access_log(capfd: pytest.CaptureFixture[str]) -> None:
    log: list[AccessRecord] = []
    with ArtifactServer({"/agent": AGENT}, request_timeout=0.3, access_log=log) as server:
        fetch("GET", server.url("/agent"))
        fetch("POST", server.url("/agent"), data=b"x")
        fetch("GET", server.url("/missing?x=1"))
        with socket.create_connection(address(server, "ipv4"), timeout=10) as stalled:
            assert stalled.recv(1) == b""  # a timed-out connection must not print either
        if server.ipv6_available:
            fetch("HEAD", server.url("/agent", "ipv6"))
    assert capfd.readouterr() == ("", "")
    expected = [AccessRecord("ipv4", "GET", "/agent", 200), AccessRecord("ipv4", "POST", "/agent", 405),
                AccessRecord("ipv4", "GET", "/missing?x=1", 404)]
    if server.ipv6_available:
        expected.append(AccessRecord("ipv6", "HEAD", "/agent", 200))
    assert log == expected
    assert server.counts() == {"/agent": 2 + server.ipv6_available, "/missing": 1}


def test_misuse_is_refused_with_a_clear_error(server: ArtifactServer) -> None:
    with pytest.raises(ArtifactServerError, match="before start"):
        server.add("/late", b"x")
    with pytest.raises(ArtifactServerError, match="called twice"):
        server.start()
    with pytest.raises(ArtifactServerError, match="start with '/'"):
        ArtifactServer({"agent": AGENT})
    with pytest.raises(ArtifactServerError, match="call start"):
        ArtifactServer({"/agent": AGENT}).url("/agent")
