"""A provider's services registered after its gRPC server started, so that the handshake line need not wait for them.

`DeferredServices` is both a registration target (what a generated `add_*Servicer_to_server` calls) and the one
generic handler the server consults for every method. Registration has two phases: first what must answer soon
(go-plugin's health, controller and stdio: cheap to import), then the provider's own services (their imports may
take long). Each phase's methods are served as soon as that phase has run; a call gets the registered handler itself
(nothing in between). A call that arrives before its phase has run (a host sends Info right after the handshake)
waits, bounded, for it, then runs on that handler: the request and response bytes go through the handler's own
(de)serializers, so the wire and the servicer see what they always do.
"""

from __future__ import annotations

import functools
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import grpc

# How long a call that arrived early waits for the services (at most its own deadline): far above any import time,
# so only a provider hung while loading hits it, and the call then says so instead of hanging.
LOAD_WAIT_S = 60.0


class DeferredServices(grpc.GenericRpcHandler):
    def __init__(self, wait_s: float = LOAD_WAIT_S) -> None:
        self._handlers: list[grpc.GenericRpcHandler] = []
        self._early = 0  # how many of the handlers the first phase registered (served before the rest is loaded)
        self._early_done = threading.Event()
        self._loaded = threading.Event()
        self._failed = False
        self._wait_s = wait_s

    # -- registration (a grpc.Server's two methods the generated code calls) -----------------------------------------
    def add_generic_rpc_handlers(self, handlers: tuple[grpc.GenericRpcHandler, ...]) -> None:
        self._handlers.extend(handlers)

    def add_registered_method_handlers(self, service_name: str, handlers: dict[str, Any]) -> None:
        """Generated code registers each method twice; the generic handlers it passed first already cover them."""

    def load(self, register: Callable[[DeferredServices], None],
             early: Callable[[DeferredServices], None] | None = None) -> bool:
        """Run `early(self)`, serve what it registered, then run `register(self)`; False (traceback on stderr,
        waiting calls told UNAVAILABLE) if either raised."""
        try:
            if early is not None:
                early(self)
                self._early = len(self._handlers)
            self._early_done.set()
            register(self)
        except BaseException:  # noqa: BLE001 - a crash at start-up: reported as Python reports one, then exit 1
            self._failed = True
            traceback.print_exc()
        finally:
            self._early_done.set()
            self._loaded.set()
        return not self._failed

    # -- lookup ----------------------------------------------------------------------------------------------------
    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if self._loaded.is_set():
            return self._lookup(handler_call_details)
        found = self._lookup_early(handler_call_details)
        if found is not None:
            return found
        return grpc.stream_stream_rpc_method_handler(functools.partial(self._when_loaded, handler_call_details))

    def _lookup_early(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if not self._early_done.is_set():
            return None
        return _first(self._handlers[:self._early], details)

    def _lookup(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if self._failed:
            return grpc.stream_stream_rpc_method_handler(_failed_start)
        return _first(self._handlers, details)

    def _when_loaded(self, details: grpc.HandlerCallDetails, requests: Iterator[bytes],
                     context: grpc.ServicerContext) -> Iterator[bytes]:
        remaining = context.time_remaining()
        wait_s = self._wait_s if remaining is None else min(self._wait_s, remaining)
        deadline = time.monotonic() + wait_s
        handler = self._lookup_early(details) if self._early_done.wait(wait_s) else None
        if handler is None:
            if not self._loaded.wait(max(0.0, deadline - time.monotonic())):
                context.abort(grpc.StatusCode.UNAVAILABLE,
                              f"the provider's services were still loading after {wait_s:.0f}s")
            handler = self._lookup(details)
        if handler is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")  # grpc's own words for it
        yield from _run(handler, requests, context)


def _first(handlers: list[grpc.GenericRpcHandler], details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
    for handler in handlers:
        found = handler.service(details)
        if found is not None:
            return found
    return None


def _failed_start(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
    context.abort(grpc.StatusCode.UNAVAILABLE, "the provider failed while starting its services (see its stderr)")
    yield b""  # pragma: no cover - abort raised


class _Decoded:
    """The request stream through the handler's deserializer (an iterator object: any thread may pull it)."""

    def __init__(self, requests: Iterator[bytes], decode: Callable[[bytes], Any]) -> None:
        self._requests = requests
        self._decode = decode

    def __iter__(self) -> _Decoded:
        return self

    def __next__(self) -> Any:
        return self._decode(next(self._requests))


def _run(handler: grpc.RpcMethodHandler, requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
    """Serve one call that arrived as a raw byte stream on `handler`, whatever its cardinality."""
    decode = handler.request_deserializer or (lambda data: data)
    encode = handler.response_serializer or (lambda message: message)
    if handler.request_streaming:
        request: Any = _Decoded(requests, decode)
    else:
        first = next(requests, None)
        if first is None:
            context.abort(grpc.StatusCode.INTERNAL, "the call carried no request message")
        request = decode(first)
    behaviour = {(False, False): handler.unary_unary, (False, True): handler.unary_stream,
                 (True, False): handler.stream_unary, (True, True): handler.stream_stream}[
        (bool(handler.request_streaming), bool(handler.response_streaming))]
    if handler.response_streaming:
        for response in behaviour(request, context):
            yield encode(response)
    else:
        yield encode(behaviour(request, context))
