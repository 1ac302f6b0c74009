"""Channel input buffers that pass received packets on without copying them (for paramiko's channels).

paramiko keeps what a channel has received in an array.array: each packet's data is copied in, and each read copies
what it takes out twice (a slice of the array, then tobytes), then moves the rest to the front. All of it happens
under the lock the transport thread needs to feed the next packet. With 256 KiB packets (tuning.py) those copies
are a large part of a receiver's own work: on the agent for host->guest bulk data, on devsy's SSH master for
guest->host. Here the received bytes objects are kept as they came, and a read that takes whole packets returns the
packet itself (one join when it takes several). Measured with ci/bench_ssh.py.

Used by both ends, like kex_safe.py: the agent's server transport and devsy's client transport.
"""

from __future__ import annotations

import collections
from typing import Any, Optional

from .fastimport import import_paramiko

import_paramiko()
from paramiko.buffered_pipe import BufferedPipe  # noqa: E402 - after the fast import above
from paramiko.transport import ChannelMap  # noqa: E402


class _Chunks:
    """What BufferedPipe keeps in `_buffer`: it asks for len() and deletes from the front (`del buffer[:n]`)."""

    def __init__(self) -> None:
        self._chunks: collections.deque[bytes] = collections.deque()
        self._offset = 0  # bytes of the first chunk already taken (a read smaller than a packet)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def append(self, data: bytes) -> None:
        if data:
            self._chunks.append(data)
            self._size += len(data)

    def peek(self, limit: Optional[int]) -> bytes:
        """Up to `limit` bytes from the front (all without a limit), not taken out."""
        _not_negative(limit)
        wanted = self._size if limit is None else min(limit, self._size)
        parts: list[bytes] = []
        offset = self._offset
        for chunk in self._chunks:
            if wanted <= 0:
                break
            piece = chunk if offset == 0 and len(chunk) <= wanted else chunk[offset:offset + wanted]
            parts.append(piece)
            wanted -= len(piece)
            offset = 0
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def __delitem__(self, index: slice) -> None:
        if not isinstance(index, slice) or index.start not in (None, 0) or index.step not in (None, 1):
            raise TypeError(f"only the front of a channel buffer can be deleted, not [{index}]")
        _not_negative(index.stop)
        count = self._size if index.stop is None else min(index.stop, self._size)
        self._size -= count
        while count:
            rest = len(self._chunks[0]) - self._offset
            if rest <= count:
                self._chunks.popleft()
                self._offset = 0
                count -= rest
            else:
                self._offset += count
                count = 0


def _not_negative(size: Optional[int]) -> None:
    # paramiko's array would read a negative size as "all but the last n": nothing asks for that, so it is refused
    # rather than answered with b"" (which a channel's reader takes for end of file).
    if size is not None and size < 0:
        raise ValueError(f"a negative size ({size}) for a channel buffer")


class ChunkedPipe(BufferedPipe):
    """paramiko's BufferedPipe (its locking, waits, timeouts and close), with the packets kept as they came."""

    def __init__(self) -> None:
        super().__init__()
        self._buffer = _Chunks()

    def _buffer_frombytes(self, data: Any) -> None:
        self._buffer.append(bytes(data))  # bytes(b) of a bytes object is that object: no copy

    def _buffer_tobytes(self, limit: Optional[int] = None) -> bytes:
        return self._buffer.peek(limit)


class _ChunkedChannels(ChannelMap):
    """paramiko registers every channel here right after creating it, before it can receive anything."""

    def put(self, chanid: int, chan: Any) -> None:
        chan.in_buffer = ChunkedPipe()
        chan.in_stderr_buffer = ChunkedPipe()
        super().put(chanid, chan)


class ChunkedChannelBuffers:
    """Mix in before paramiko.Transport: every channel of the transport gets ChunkedPipe input buffers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        self._channels = _ChunkedChannels()  # no channel exists yet
