"""One call's deadline, and the status code of a call that failed near it.

Both ends of a gRPC call watch its deadline. A server whose copy of it passes first ends the call with
RST_STREAM(CANCEL) (grpc-go does), and when that frame beats the client's own timer (a loaded machine is
enough) the client sees CANCELLED for what was a deadline. The gRPC HTTP/2 protocol asks clients to double-check
their deadline on CANCELLED; grpcio does not, so devsy does it here, for every call it makes with a deadline.
"""

from __future__ import annotations

import time

import grpc


class CallDeadline:
    """Taken just before the call is made with `timeout`: it ends no later than the call's own deadline."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._at = None if timeout is None else time.monotonic() + timeout

    def passed(self) -> bool:
        return self._at is not None and time.monotonic() >= self._at

    def code(self, error: grpc.RpcError) -> grpc.StatusCode:
        """The error's status code; CANCELLED after the deadline (a cancel of our own aside) is DEADLINE_EXCEEDED."""
        code: grpc.StatusCode = error.code()  # type: ignore[attr-defined]
        if code is grpc.StatusCode.CANCELLED and self.passed():
            return grpc.StatusCode.DEADLINE_EXCEEDED
        return code
