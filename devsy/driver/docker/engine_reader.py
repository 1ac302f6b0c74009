"""Looking at a local engine without the Docker SDK: a workspace's container found and inspected.

`devsy status`, a reused `devsy up` of a running instance, the refusal of an exec in a stopped one and the Docker
provider's Info only list and inspect one container, ping the engine or read its version. The SDK (docker,
requests, urllib3) takes ~85 ms to import, about as long as everything else such a command does
(ci/bench_docker.py), so these GETs go over the engine's unix socket with the standard library's http.client. The
answers are the engine's own JSON, the same the SDK hands back (a container's inspect is its `attrs`).

Only a local unix socket named by a plain absolute path is read this way (the default socket, `unix:///path`), so
that the reader and the SDK can never reach two different engines: any other DOCKER_HOST (tcp://, ssh://, TLS
settings, and unix:// forms that URL parsing rewrites: a relative path, a host part, a trailing slash, a query) and
everything that changes something go through the SDK (engine.py). One difference is deliberate: a container
removed between the list and its inspect is absent here, where the SDK's list raises NotFound.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
from typing import Any
from urllib.parse import quote

from devsy.driver.docker.engine import API_TIMEOUT_S, engine_address, engine_message, unavailable
from devsy.errors import DriverError

_UNIX = "unix://"
# A path the SDK's URL parsing leaves as it is: absolute, no host part, query, fragment, blank or trailing slash.
_PLAIN_PATH = re.compile(r"/[\w.+\-/]*[\w.+\-]", re.ASCII)
# The variables that make the SDK talk TLS; with them set, leave the engine to the SDK.
_TLS_VARIABLES = ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")


def local_socket() -> str | None:
    """The path of the engine's unix socket as DOCKER_HOST names it (the default socket without it); None when the
    engine is not reached through a unix socket named by a plain absolute path (see the module docstring)."""
    address = engine_address().strip()
    if not address.startswith(_UNIX) or any(os.environ.get(name) for name in _TLS_VARIABLES):
        return None
    path = address[len(_UNIX):]
    return path if _PLAIN_PATH.fullmatch(path) else None


_MISSING = object()  # a 404 where absence is an answer (distinct from a JSON null)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class EngineReader:
    """GETs against the engine at `path` (a unix socket), one connection each; errors are devsy's typed errors."""

    def __init__(self, path: str, timeout: float = API_TIMEOUT_S) -> None:
        self._path, self._timeout = path, timeout

    def ping(self, action: str) -> None:
        """The engine answers, and says it is usable (BackendUnavailable otherwise, as the SDK's connect says): one
        that refuses the ping (shutting down, a proxy denying us) cannot be used."""
        status, reason, body = self._request("/_ping", action)
        if status != 200:
            raise unavailable(f"it answered {status} {_said(body, reason)}", action)

    def version(self, action: str) -> dict[str, Any]:
        """The engine's `docker version` (Version, ApiVersion, Os, Arch, ...)."""
        return _expect(self._json("/version", action), dict, action)

    def containers(self, labels: list[str], action: str) -> list[dict[str, Any]]:
        """Every container (running or not) carrying all of `labels` ("key=value"), as the engine lists them."""
        filters = quote(json.dumps({"label": labels}, separators=(",", ":")))
        found = _expect(self._json(f"/containers/json?all=1&filters={filters}", action), list, action)
        for item in found:
            if not isinstance(item, dict) or not isinstance(item.get("Id"), str):
                raise _not_an_engine(action, "a container without an Id")
        return found

    def inspect(self, container_id: str, action: str) -> dict[str, Any] | None:
        """The container's inspect; None when it is gone (removed since it was listed)."""
        answer = self._json(f"/containers/{quote(container_id, safe='')}/json", action, missing_ok=True)
        return None if answer is _MISSING else _expect(answer, dict, action)

    def _json(self, path: str, action: str, missing_ok: bool = False) -> Any:
        """The engine's JSON answer; _MISSING for a 404 when `missing_ok`; any other failure a DriverError."""
        status, reason, body = self._request(path, action)
        if status == 404 and missing_ok:
            return _MISSING
        if status != 200:
            raise DriverError(f"{action}: {_said(body, reason)}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise _not_an_engine(action, f"an answer that is not JSON ({exc})") from exc

    def _request(self, path: str, action: str) -> tuple[int, str, bytes]:
        """(status, reason, body) of a GET; BackendUnavailable when the engine cannot be reached."""
        connection = _UnixConnection(self._path, self._timeout)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.reason, response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise unavailable(exc, action) from exc
        finally:
            connection.close()


def _expect(answer: Any, kind: type, action: str) -> Any:
    """`answer` if it is a `kind` (a JSON list or object); anything else is no answer of a Docker engine."""
    if not isinstance(answer, kind):
        raise _not_an_engine(action, f"an answer that is not a JSON {'list' if kind is list else 'object'}")
    return answer


def _not_an_engine(action: str, what: str) -> DriverError:
    return DriverError(f"{action}: the engine sent {what}", hint="check that DOCKER_HOST names a Docker engine")


def _said(body: bytes, reason: str) -> str:
    """What the engine said of a failed request, as devsy may repeat it (engine_message)."""
    return engine_message(_message(body) or reason)


def _message(body: bytes) -> str:
    """The engine's error message (its JSON `message`), else the body's first line."""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("message"), str):
        return answer["message"]
    text = body.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else ""
