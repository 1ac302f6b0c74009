"""Keeping secrets out of everything devsy itself prints, logs or reports (README.md, "Secrets"), in every layer.

One mask (`MASK`), one minimum length (`MIN_SECRET_LEN`), one matcher (`Redactor`: a whole text with `redactor(text)`,
a stream with `feed`/`finish`, a binary stream with `RedactingWriter`), one process-wide registry of secrets
(`register_secrets`, `configured_secrets`) and the error redactor the CLI applies before printing (`redact_error`).
The bytes of `devsy exec` and `devsy ssh` sessions never pass through here: they are the guest's data.

A secret is every line of `DEVSY_REDACT`, every registered value (containerEnv, remoteEnv, build args and mount
sources of the config this process loaded: devsy/devcontainer/config_secrets.py) and the values a caller adds (the
env, argv and mount sources of the request it serves). Values shorter than MIN_SECRET_LEN bytes are not secrets:
masking "1" or "yes" everywhere would destroy ordinary output while hiding nothing. A value of the form `KEY=VALUE`
or `--flag=value` (an argv element) also masks its part after the first `=`, which is how it appears on its own.
Credentials in URLs are removed, not masked, by `redact_url` (URL syntax, not values); `mask_flag_values` masks the
values of `--flag KEY=VALUE` arguments in a shown command line, by position.

Streaming rule: the filter holds back only a tail that could still become a secret, i.e. at most len(secret)-1
bytes, and releases it as soon as the next bytes show it cannot (or at end of stream). It never holds a byte that
cannot start a secret, so output that merely ends mid-line, or a binary protocol, is never delayed.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Collection, Iterable, Sequence
from typing import BinaryIO

from devsy.errors import DevsyError

REDACT_ENV = "DEVSY_REDACT"
MIN_SECRET_LEN = 4
MASK = "***"
_MASK_BYTES = MASK.encode()

Secret = str | bytes

# Values this process passes on (environment, build args, mount sources): secrets of all it prints from then on.
# Process-wide, because an error raised deep in a driver is printed by the CLI, which never saw the config.
_registered: set[str] = set()
_registered_lock = threading.Lock()


def _as_bytes(value: Secret) -> bytes:
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)


def register_secrets(values: Iterable[str]) -> None:
    """Treat `values` as secrets in everything this process prints from now on (progress, errors, JSON outcome)."""
    with _registered_lock:
        _registered.update(v for v in values if v)


def registered_count() -> int:
    """How many values were registered; a writer compares it with what it has seen to pick up new secrets."""
    with _registered_lock:
        return len(_registered)


def registered_secrets() -> list[str]:
    """The values registered so far, for handing them to a devsy process that prints on this one's behalf."""
    with _registered_lock:
        return sorted(_registered)


def configured_secrets(extra: Iterable[str] = ()) -> list[bytes]:
    """DEVSY_REDACT's lines, the registered values and `extra`, as bytes, without the too-short ones and duplicates."""
    with _registered_lock:
        registered = list(_registered)
    values = [*os.environ.get(REDACT_ENV, "").splitlines(), *registered, *extra]
    secrets = {_as_bytes(v) for v in values if len(_as_bytes(v)) >= MIN_SECRET_LEN}
    return sorted(secrets, key=lambda s: (-len(s), s))


class Redactor:
    """Masks every known secret: `redactor(text)` for a whole message; for a stream, feed bytes in order with `feed`
    and call `finish` at its end (each returns what may be released now)."""

    def __init__(self, secrets: Iterable[Secret] = ()) -> None:
        self._secrets: set[bytes] = set()
        self._pattern: re.Pattern[bytes] | None = None
        # Secrets by their first byte: where a held tail could start (memory linear in the secrets' length; a set
        # of every prefix would be quadratic: gigabytes for one long `sh -c` script among an exec's argv).
        self._by_first: dict[int, list[bytes]] = {}
        self._longest = 0
        self._pending = b""
        self.add(secrets)

    def add(self, secrets: Iterable[Secret]) -> None:
        """Mask these too from now on; a held tail is matched against the new set at the next feed or finish."""
        new: set[bytes] = set()
        for secret in secrets:
            raw = _as_bytes(secret)
            # The part after "=" of "KEY=VALUE" or "--flag=value" is the value itself, and may be shown alone.
            new.update(v for v in (raw, raw.partition(b"=")[2]) if len(v) >= MIN_SECRET_LEN)
        new -= self._secrets
        if not new:
            return
        self._secrets |= new
        ordered = sorted(self._secrets, key=lambda s: (-len(s), s))
        # Longest first: at one position the longest secret wins (a secret that contains another is masked whole).
        self._pattern = re.compile(b"|".join(re.escape(s) for s in ordered))
        self._by_first = {}
        for secret in ordered:
            self._by_first.setdefault(secret[0], []).append(secret)
        self._longest = len(ordered[0])

    def __call__(self, text: str) -> str:
        """`text` (a whole message) with every secret masked; independent of any stream being fed."""
        if self._pattern is None:
            return text
        return self._pattern.sub(_MASK_BYTES, _as_bytes(text)).decode("utf-8", "surrogateescape")

    def feed(self, data: bytes) -> bytes:
        if self._pattern is None:
            return bytes(data)
        buffer = self._pending + bytes(data)
        out, position = [], 0
        while True:
            hold = self._hold_start(buffer, position)
            match = self._pattern.search(buffer, position)
            if match is not None and match.start() < hold:
                out += [buffer[position:match.start()], _MASK_BYTES]
                position = match.end()
                continue
            out.append(buffer[position:hold])
            self._pending = buffer[hold:]
            return b"".join(out)

    def finish(self) -> bytes:
        """End of a stream (or of one piece of output): nothing more can complete a secret, so mask whole ones and
        release the rest. The redactor can be fed again afterwards."""
        if self._pattern is None:
            return b""
        rest, self._pending = self._pending, b""
        return self._pattern.sub(_MASK_BYTES, rest)

    def _hold_start(self, buffer: bytes, position: int) -> int:
        """Index of the earliest tail of `buffer` that is a proper prefix of a secret (len(buffer) if none)."""
        for start in range(max(position, len(buffer) - self._longest + 1), len(buffer)):
            candidates = self._by_first.get(buffer[start])
            if candidates:
                tail = buffer[start:]
                if any(len(secret) > len(tail) and secret.startswith(tail) for secret in candidates):
                    return start
        return len(buffer)


class RedactingWriter:
    """A binary stream that redacts what it passes to `target`; `close()` flushes the held tail (not the target).

    Thread-safe: the driver writes stdout and stderr from different threads, each through its own writer, but a
    writer may also be flushed from the main thread at the end.
    """

    def __init__(self, target: BinaryIO, secrets: Iterable[Secret]) -> None:
        self._target = target
        self._redactor = Redactor(secrets)
        self._lock = threading.Lock()
        self.closed = False

    def add_secrets(self, secrets: Iterable[Secret]) -> None:
        with self._lock:
            self._redactor.add(secrets)

    def drain(self) -> None:
        """The current piece of output ended (a hook finished): release the held tail, masked, and keep the writer."""
        with self._lock:
            rest = self._redactor.finish()
            if rest:
                self._target.write(rest)
            self._target.flush()

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:
        with self._lock:
            released = self._redactor.feed(data)
            if released:
                self._target.write(released)
        return len(data)

    def flush(self) -> None:
        with self._lock:
            self._target.flush()

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            rest = self._redactor.finish()
            if rest:
                self._target.write(rest)
            self._target.flush()


def redact_text(text: str, secrets: Iterable[Secret] | None = None) -> str:
    """A whole message (an error, a diagnostic) with `secrets` masked, by default the configured ones."""
    return Redactor(configured_secrets() if secrets is None else secrets)(text)


def redact_error(error: DevsyError) -> DevsyError:
    """The same error with the configured secrets masked in its message and hint (it is about to be printed)."""
    secrets = configured_secrets()
    if secrets:
        redact = Redactor(secrets)
        error.message, error.hint = redact(error.message), redact(error.hint)
    return error


_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@")


def redact_url(text: str) -> str:
    """Remove `user:password@` from every scheme URL in `text`, so messages never carry credentials."""
    return _URL_USERINFO.sub(lambda m: m.group("scheme"), text)


def mask_flag_values(argv: Sequence[str], flags: Collection[str]) -> list[str]:
    """argv with the value of each `FLAG KEY=VALUE` / `FLAG=KEY=VALUE` (FLAG in `flags`) shown as `KEY=***`."""
    masked: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            masked.append(f"{arg.partition('=')[0]}={MASK}")
            hide_next = False
            continue
        flag, eq, value = arg.partition("=")
        if flag in flags and eq:
            masked.append(f"{flag}={value.partition('=')[0]}={MASK}")
            continue
        masked.append(arg)
        hide_next = arg in flags
    return masked
