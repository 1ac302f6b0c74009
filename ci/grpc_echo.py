"""A bare grpcio echo, no devsy code: the gRPC transport's own throughput at the protocol's frame size.

    python ci/grpc_echo.py --serve SOCKET_PATH    (the server; bench_protocol starts it)

bench_protocol streams its payload through this server in MAX_FRAME frames, both directions at once, as `cat` over
Exec does, so the protocol path's figures can be read against what grpcio itself moves between two Python processes
on the same machine in the same run. Bytes pass through identity serializers (no protobuf), so nothing here costs
more than the transport does.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import select
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc

_SERVICE, _METHOD = "bench.Echo", "Stream"
_READY = b"ready\n"
_READY_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0


def _identity(data: bytes) -> bytes:
    return data


def serve(socket_path: str) -> None:
    def echo(frames: Iterator[bytes], _context: grpc.ServicerContext) -> Iterator[bytes]:
        yield from frames

    handler = grpc.method_handlers_generic_handler(
        _SERVICE, {_METHOD: grpc.stream_stream_rpc_method_handler(echo, _identity, _identity)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix:{socket_path}")
    server.start()
    sys.stdout.buffer.write(_READY)
    sys.stdout.flush()
    server.wait_for_termination()


@contextlib.contextmanager
def echo_server() -> Iterator[str]:
    """A server process for the duration of the block; yields its gRPC target."""
    socket_path = str(Path(tempfile.mkdtemp(prefix="bench-echo-")) / "echo.sock")
    process = subprocess.Popen([sys.executable, __file__, "--serve", socket_path],  # noqa: S603
                               stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        ready, _, _ = select.select([process.stdout], [], [], _READY_TIMEOUT_S)
        line = process.stdout.readline() if ready else b""
        if line != _READY:
            raise SystemExit(f"the gRPC echo server did not start within {_READY_TIMEOUT_S:g}s (it said {line!r})")
        yield f"unix:{socket_path}"
    finally:
        process.terminate()
        process.wait(_STOP_TIMEOUT_S)
        with contextlib.suppress(OSError):
            os.unlink(socket_path)


def echo(target: str, payload: bytes, frame: int) -> None:
    """Stream `payload` in `frame`-byte frames to the server and read it back; raises if a byte differs."""
    def frames() -> Iterator[bytes]:
        for offset in range(0, len(payload), frame):
            yield payload[offset:offset + frame]

    received = hashlib.sha256()
    with grpc.insecure_channel(target) as channel:
        call = channel.stream_stream(f"/{_SERVICE}/{_METHOD}", request_serializer=_identity,
                                     response_deserializer=_identity)
        for data in call(frames()):
            received.update(data)
    if received.digest() != hashlib.sha256(payload).digest():
        raise SystemExit("the gRPC echo returned different bytes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", metavar="SOCKET_PATH", required=True)
    serve(parser.parse_args().serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
