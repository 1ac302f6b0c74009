"""Channel input buffers that keep received packets as they came (devsy/agent/guest/channel_buffer.py): the same
answers as paramiko's own BufferedPipe for any sequence of feeds and reads, a whole packet read without a copy, and
every channel of both ends' transports (devsy's client, the agent's server) given them."""

from __future__ import annotations

import random
import socket
import threading

import pytest
from paramiko.buffered_pipe import BufferedPipe, PipeTimeout
from paramiko.channel import Channel

from devsy.agent.guest.channel_buffer import ChunkedChannelBuffers, ChunkedPipe
from devsy.agent.guest.server import _Transport
from devsy.ssh.client import _client_transport_class


def test_any_feeds_and_reads_give_what_paramikos_buffer_gives() -> None:
    for seed in range(300):
        rnd = random.Random(seed)
        ours, theirs = ChunkedPipe(), BufferedPipe()
        for _ in range(rnd.randint(1, 40)):
            action = rnd.random()
            if action < 0.45:
                data = rnd.randbytes(rnd.choice([0, 1, 5, 100, rnd.randint(1, 5000)]))
                ours.feed(data)
                theirs.feed(data)
            elif action < 0.85 and len(theirs):
                size = rnd.choice([1, 3, len(theirs), len(theirs) + 10, rnd.randint(1, 6000)])
                assert ours.read(size, timeout=0) == theirs.read(size, timeout=0), seed
            elif action < 0.95:
                assert ours.empty() == theirs.empty(), seed
            assert len(ours) == len(theirs) and ours.read_ready() == theirs.read_ready(), seed
        ours.close()
        theirs.close()
        assert ours.read(1 << 30) == theirs.read(1 << 30), seed
        assert ours.read(10) == theirs.read(10) == b""  # closed and drained: end of file


def test_a_read_of_whole_packets_returns_the_packet_itself() -> None:
    pipe = ChunkedPipe()
    packet = bytes(300_000)
    pipe.feed(packet)
    assert pipe.read(1 << 24) is packet  # no copy of the received data
    pipe.feed(b"abc")
    pipe.feed(b"defg")
    assert pipe.read(2) == b"ab" and pipe.read(100) == b"cdefg"


def test_an_empty_buffer_times_out_like_paramikos_and_a_feed_wakes_a_waiting_read() -> None:
    pipe = ChunkedPipe()
    with pytest.raises(PipeTimeout):
        pipe.read(10, timeout=0.0)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read(10, timeout=30)))
    reader.start()
    pipe.feed(b"wake")
    reader.join(30)
    assert got == [b"wake"]


def test_only_the_front_of_the_buffer_can_be_deleted_and_a_negative_size_is_refused() -> None:
    pipe = ChunkedPipe()
    pipe.feed(b"abcdef")
    with pytest.raises(TypeError, match="only the front"):
        del pipe._buffer[2:4]
    with pytest.raises(ValueError, match="negative"):
        pipe.read(-2)
    assert pipe.read(10) == b"abcdef"  # nothing was taken by the refused read


@pytest.mark.parametrize("transport_class", [_client_transport_class(), _Transport], ids=["client", "agent-server"])
def test_every_channel_of_both_ends_gets_chunked_buffers(transport_class: type) -> None:
    assert issubclass(transport_class, ChunkedChannelBuffers)
    ours, theirs = socket.socketpair()
    try:
        transport = transport_class(ours)
        channel = Channel(7)
        transport._channels.put(7, channel)  # as paramiko does with every channel it creates, on either end
        assert isinstance(channel.in_buffer, ChunkedPipe) and isinstance(channel.in_stderr_buffer, ChunkedPipe)
        assert transport._channels.get(7) is channel
    finally:
        ours.close()
        theirs.close()
