"""The Docker driver's reading of an attached exec's framed output (exec_stream.FrameDemuxer): the engine's frames
split back into stdout and stderr whatever the read boundaries, consecutive frames of a stream passed on as one
piece, and a read that holds only data passed on without a copy. The real engine is exercised by the Docker driver's
exec tests; here every boundary case is forced."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator

import pytest

from devsy.driver.docker.exec_stream import FrameDemuxer

_HEADER = struct.Struct(">BxxxL")  # the engine's: stream id, 3 zero bytes, big-endian length
STDOUT, STDERR = 1, 2


def wire(*frames: tuple[int, bytes]) -> bytes:
    return b"".join(_HEADER.pack(stream, len(data)) + data for stream, data in frames)


def feed_in_pieces(data: bytes, sizes: Iterator[int]) -> list[tuple[int, bytes]]:
    """What the demuxer gives for `data` read in pieces of the given sizes (the last piece: the rest)."""
    demux, out, pos = FrameDemuxer(), [], 0
    while pos < len(data):
        size = next(sizes, len(data))
        out += demux.feed(data[pos:pos + size])
        pos += size
    return out


def test_consecutive_frames_of_one_stream_in_one_read_come_as_one_piece() -> None:
    data = wire((STDOUT, b"a" * 10), (STDOUT, b"b" * 20), (STDERR, b"oops"), (STDOUT, b"c"))
    assert FrameDemuxer().feed(data) == [(STDOUT, b"a" * 10 + b"b" * 20), (STDERR, b"oops"), (STDOUT, b"c")]


@pytest.mark.parametrize("cut", range(1, 8))
def test_a_header_cut_between_two_reads_is_put_back_together(cut: int) -> None:
    data = wire((STDOUT, b"first"), (STDERR, b"second"))
    header_start = len(wire((STDOUT, b"first")))
    out = feed_in_pieces(data, iter([header_start + cut]))
    assert out == [(STDOUT, b"first"), (STDERR, b"second")]


def test_a_frame_cut_between_reads_keeps_its_stream() -> None:
    data = wire((STDERR, b"x" * 100), (STDOUT, b"y"))
    out = feed_in_pieces(data, iter([8 + 40, 30]))
    assert out == [(STDERR, b"x" * 40), (STDERR, b"x" * 30), (STDERR, b"x" * 30), (STDOUT, b"y")]


def test_empty_frames_give_nothing() -> None:
    assert FrameDemuxer().feed(wire((STDOUT, b""), (STDERR, b""), (STDOUT, b"z"))) == [(STDOUT, b"z")]


def test_a_read_of_nothing_but_data_is_passed_on_as_is() -> None:
    demux = FrameDemuxer()
    assert demux.feed(_HEADER.pack(STDOUT, 1000)) == []
    body = bytes(range(256)) * 3
    [(stream, piece)] = demux.feed(body)
    assert stream == STDOUT and piece is body  # the very object read: no copy


def test_any_read_boundaries_give_each_stream_its_bytes_in_order() -> None:
    for seed in range(200):
        rnd = random.Random(seed)
        sizes_of_frames = [rnd.choice([0, 1, 8, 9, 32768, rnd.randint(1, 70000)]) for _ in range(rnd.randint(0, 25))]
        frames = [(rnd.choice([STDOUT, STDOUT, STDERR]), rnd.randbytes(size)) for size in sizes_of_frames]
        data = wire(*frames)
        sizes = iter(lambda: rnd.choice([1, 7, 8, 9, rnd.randint(1, 150000)]), None)
        out = feed_in_pieces(data, sizes)
        assert all(piece for _stream, piece in out), "no empty piece is passed on"
        assert _runs(out) == _runs(frames), seed  # the streams' bytes in the order they were framed
        for stream in (STDOUT, STDERR):
            assert b"".join(p for s, p in out if s == stream) == b"".join(d for s, d in frames if s == stream), seed


def _runs(pieces: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The bytes of consecutive pieces (or frames) of one stream joined: what any read boundaries must preserve."""
    runs: list[tuple[int, bytes]] = []
    for stream, data in pieces:
        if not data:
            continue
        if runs and runs[-1][0] == stream:
            runs[-1] = (stream, runs[-1][1] + data)
        else:
            runs.append((stream, data))
    return runs
