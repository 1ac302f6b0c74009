"""Checksum-pinned downloads into a private cache. Stdlib only: the remote agent and the host both use it.

`fetch(source, cache_dir)` returns `<cache>/<sha256>`, and only verified bytes ever get that name: a download is
written to `<sha256>.part`, hashed as a whole, and renamed into place only when the digest matches, so nothing can
use (or execute) unverified bytes. Cached files are mode 0600: the cache is never executed from.

Transient failures (connection errors, timeouts, 5xx, a short body) are retried a bounded number of times with
backoff. A retry resumes the partial file with a Range request, but a resumed file counts only if the whole file
verifies; if it does not, it is discarded and fetched once more from zero (the partial bytes are never trusted).
A 4xx answer is final. A complete fresh download with the wrong digest is a ChecksumMismatch naming the file and
both digests, and nothing of it is kept. Concurrent fetches of one file (two workspaces starting at once) serialize
on `<sha256>.lock`, so it is downloaded once.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.client
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

CHUNK = 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


@dataclass(frozen=True)
class Source:
    name: str  # what the file is, for messages (e.g. the provider binary's name)
    url: str
    sha256: str


@dataclass(frozen=True)
class Policy:
    attempts: int = 4
    timeout_s: float = 30.0  # per connect / read; a stalled server is a transient failure
    backoff_s: float = 0.5
    max_backoff_s: float = 4.0


DEFAULT_POLICY = Policy()


class DownloadError(Exception):
    """A download that cannot succeed as asked; `kind` lets callers map it to their own typed errors."""

    kind = "download-failed"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


class ChecksumMismatch(DownloadError):
    kind = "download-checksum"

    def __init__(self, name: str, url: str, expected: str, actual: str) -> None:
        super().__init__(f"{name}: the bytes from {url} have sha256 {actual}, but the provider config pins "
                         f"{expected}; they were refused and nothing was installed",
                         hint="fix the sha256 (or the URL) in the provider config, or check what serves that URL")
        self.name, self.expected, self.actual = name, expected, actual


class _Transient(Exception):
    pass


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def check_source(source: Source) -> None:
    if not _SHA256.match(source.sha256):
        raise DownloadError(f"{source.name}: sha256 {source.sha256!r} is not 64 lowercase hex digits",
                            hint="put the file's sha256 (as printed by sha256sum) in the provider config")
    if not source.url.startswith(("http://", "https://")):
        raise DownloadError(f"{source.name}: URL {source.url!r} is not http(s)", hint="use an http:// or https:// URL")


def cached(source: Source, cache_dir: str) -> str | None:
    """The verified cache file of `source`, or None (a corrupt one is removed)."""
    path = os.path.join(cache_dir, source.sha256)
    if not os.path.isfile(path):
        return None
    if sha256_of(path) == source.sha256:
        return path
    os.unlink(path)  # altered on disk: never hand it out
    return None


def fetch(source: Source, cache_dir: str, policy: Policy = DEFAULT_POLICY, lock_dir: str = "") -> tuple:
    """(path of the verified file, whether this call downloaded it). The lock file lives in `lock_dir` (default:
    the cache itself), so a cache directory can hold nothing but verified files and partial downloads."""
    check_source(source)
    os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    os.makedirs(lock_dir or cache_dir, mode=0o700, exist_ok=True)
    with open(os.path.join(lock_dir or cache_dir, source.sha256 + ".lock"), "a") as lock:
        # Blocking: the holder is itself bounded (attempts x timeouts), and our caller bounds us in turn.
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        found = cached(source, cache_dir)
        if found:
            return found, False
        return _download(source, cache_dir, policy), True


def _download(source: Source, cache_dir: str, policy: Policy) -> str:
    final = os.path.join(cache_dir, source.sha256)
    part = final + ".part"
    delay, last = policy.backoff_s, ""
    for attempt in range(1, policy.attempts + 1):
        try:
            resumed = _attempt(source, part, policy.timeout_s)
            actual = sha256_of(part)
            if actual == source.sha256:
                os.chmod(part, 0o600)
                os.replace(part, final)
                return final
            os.unlink(part)
            if not resumed:
                raise ChecksumMismatch(source.name, source.url, source.sha256, actual)
            last = "a resumed download did not verify; fetching it again from the start"
        except _Transient as exc:
            last = str(exc)
        except BaseException:
            _remove(part)
            raise
        if attempt < policy.attempts:
            time.sleep(delay)  # backoff between attempts, not synchronization
            delay = min(delay * 2, policy.max_backoff_s)
    _remove(part)
    raise DownloadError(f"{source.name}: downloading {source.url} failed {policy.attempts} times; last error: {last}",
                        hint="check that the URL is reachable from this machine, then retry")


def _attempt(source: Source, part: str, timeout: float) -> bool:
    """Fetch into `part` (resuming it when it has bytes); True when the result was resumed."""
    offset = os.path.getsize(part) if os.path.exists(part) else 0
    request = urllib.request.Request(source.url, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            resumed = bool(offset) and response.status == 206 and _range_start(response) == offset
            expected = _expected_length(response)
            written = 0
            with open(part, "ab" if resumed else "wb") as out:
                for block in iter(lambda: response.read(CHUNK), b""):
                    out.write(block)
                    written += len(block)
                out.flush()
                os.fsync(out.fileno())
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:
            os.unlink(part)  # the partial is not a prefix of what the server has now
            raise _Transient("the server refused to resume (416); starting over") from None
        if exc.code >= 500:
            raise _Transient(f"{source.url} answered {exc.code} {exc.reason}") from None
        raise DownloadError(f"{source.name}: {source.url} answered {exc.code} {exc.reason}",
                            hint="check the URL in the provider config; a workspace that already has its copy "
                                 "does not need it") from None
    except (TimeoutError, urllib.error.URLError, http.client.HTTPException, ConnectionError) as exc:
        raise _Transient(f"{source.url}: {getattr(exc, 'reason', exc)}") from None
    if expected is not None and written != expected:
        raise _Transient(f"{source.url} ended after {written} of {expected} bytes")
    return resumed


def _range_start(response) -> int:
    match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
    return int(match.group(1)) if match else -1


def _expected_length(response) -> int | None:
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() else None


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
