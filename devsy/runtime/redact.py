"""Removing secrets (env values, mount sources, argv) from text before it reaches a log, an error or a report."""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "[redacted]"
# Shorter values are not redacted: replacing every "1" or "on" would destroy the message and protect nothing.
MIN_SECRET_LEN = 4


class Redactor:
    """Replaces every known secret value in a text; longer secrets first so a secret containing another is gone."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        for secret in secrets:
            if secret and len(secret) >= MIN_SECRET_LEN:
                self._secrets.add(secret)
                # A value may show up after "KEY=" in an argv element, or as the part after "=" of "--flag=value".
                _, sep, tail = secret.partition("=")
                if sep and len(tail) >= MIN_SECRET_LEN:
                    self._secrets.add(tail)

    def __call__(self, text: str) -> str:
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def bytes(self, data: bytes) -> bytes:
        return self(data.decode("utf-8", "replace")).encode()
