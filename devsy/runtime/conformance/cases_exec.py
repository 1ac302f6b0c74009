"""Conformance cases: Exec. Every stream is checked for frame sizes, one exit frame last, and exact output."""

from __future__ import annotations

import hashlib
import signal
import threading
import time
from collections.abc import Iterator

import grpc

from devsy.exit_status import signal_number
from devsy.runtime.conformance import commands as c
from devsy.runtime.conformance.checks import CaseFailed, StreamRecord, check, expect_error, expect_status, policy
from devsy.runtime.conformance.session import UNARY_TIMEOUT_S, Session, input_frames, start_frame
from devsy.runtime.v1 import runtime_pb2 as pb
from devsy.runtime.wire.deadline import CallDeadline

_DUPLEX_BYTES = 12 * 1024 * 1024
_STALL_S = 2.0
_STALL_RPCS = 10
_DEADLINE_S = 3.0


def _exchange(session: Session, exchange: c.Exchange, what: str) -> None:
    session.exec(exchange.argv, exchange.stdin).require(what, stdout=exchange.stdout, stderr=exchange.stderr,
                                                         exit_code=exchange.exit_code)


def case_binary_echo(session: Session) -> None:
    session.exec(session.commands.echo, c.BINARY).require("echo of 00 FF 80 0A 0D 01", stdout=c.BINARY)


def case_empty_stdin(session: Session) -> None:
    session.exec(session.commands.echo, b"").require("echo with close_stdin alone", stdout=b"")


def case_argument_fidelity(session: Session) -> None:
    _exchange(session, session.command("arguments")(c.FIDELITY_ARGS),
              "spaced, quoted, shell-like, empty and unicode args")


def case_shell(session: Session) -> None:
    _exchange(session, session.command("shell"), "a shell command")


def case_stderr_only(session: Session) -> None:
    _exchange(session, session.command("stderr_only"), "output on stderr only")


def case_nonzero_exit(session: Session) -> None:
    _exchange(session, session.command("nonzero"), "a nonzero exit with stderr")


def case_signal_exit(session: Session) -> str:
    record = session.exec(session.command("signal"))
    record.require_clean("a command killed by SIGTERM")
    check(not record.stdout and not record.stderr, "a signalled command produced output")
    check((record.exit_code, record.signal) != (0, ""), "a command killed by a signal was reported as success")
    # The protocol (the Go SDK suite) requires the signal's name; 128+N alone is not enough.
    check(bool(record.signal), f"a command killed by SIGTERM came back as exit {record.exit_code} without a signal")
    # The command kills itself with SIGTERM: any other name is a wrong report (SIGTERM or TERM, as Go may send it).
    check(signal_number(record.signal) == signal.SIGTERM,
          f"a command killed by SIGTERM was reported as killed by {record.signal!r}")
    return f"exit {record.exit_code}, signal {record.signal or '(not reported)'}"


def case_early_exit(session: Session) -> None:
    """The command exits without reading 4 MiB of input: a normal exit, not an error."""
    session.exec(session.command("early_exit"), b"x" * (4 * 1024 * 1024)).require("an early exit with unread input")


def case_full_duplex(session: Session) -> str:
    """12 MiB through cat while our reader stalls: exact output, and other RPCs are served meanwhile."""
    data = hashlib.shake_256(session.run_id.encode()).digest(_DUPLEX_BYTES)
    ws = session.exec_workspace()
    sent = [0]

    def frames() -> Iterator[pb.ExecClientMessage]:
        yield start_frame(ws, session.commands.echo)
        for frame in input_frames(data):
            sent[0] += len(frame.stdin)
            yield frame

    call = session.stub.Exec(frames(), timeout=300)
    stall_end = time.monotonic() + _STALL_S
    for _ in range(_STALL_RPCS):  # the stream is stalled: we read nothing while asking for other things
        check(session.find(ws).found, "Find during a stalled Exec stream lost the workspace")
        session.stub.Info(pb.InfoRequest(), timeout=30)
    threading.Event().wait(max(0.0, stall_end - time.monotonic()))  # the stall itself is the case, not a sync
    sent_while_stalled = sent[0]
    record = StreamRecord()
    for message in call:
        record.add(message)
    record.require_clean("12 MiB duplex")
    check(hashlib.sha256(record.stdout).digest() == hashlib.sha256(data).digest(),
          f"12 MiB duplex: {len(record.stdout)} bytes came back, not the exact {len(data)} sent")
    check((record.exit_code, record.signal, bytes(record.stderr)) == (0, "", b""), "12 MiB duplex: not a clean exit")
    return f"{sent_while_stalled // 1024} KiB accepted while the reader stalled"


def _ready_stream(session: Session, deadline: CallDeadline) -> tuple[grpc.Future, threading.Event]:
    """An Exec of a command that prints the ready line and then waits; stdin stays open until `release` is set."""
    release = threading.Event()
    ready = session.command("ready")
    ws = session.exec_workspace()

    def frames() -> Iterator[pb.ExecClientMessage]:
        yield start_frame(ws, ready)
        release.wait(600)  # hold stdin open: the command must be ended by us, not by EOF

    call = session.stub.Exec(frames(), timeout=deadline.timeout)
    first = next(call)
    check(first.WhichOneof("payload") == "stdout" and first.stdout.data == c.READY_LINE,
          f"expected the ready line first, got {first}")
    return call, release


def case_cancel(session: Session) -> None:
    """Cancelling a running command ends the RPC CANCELLED; the workspace keeps running, other RPCs work."""
    call, release = _ready_stream(session, CallDeadline(120))
    try:
        call.cancel()
        expect_status(grpc.StatusCode.CANCELLED, lambda: list(call), "the cancelled Exec")
    finally:
        release.set()
    session.require_status(session.exec_workspace(), "running", "after a cancelled Exec")
    session.exec(session.commands.noop).require("an Exec after a cancelled one")


def case_deadline(session: Session) -> None:
    """A command outliving the RPC deadline ends DEADLINE_EXCEEDED; the workspace keeps running."""
    deadline = CallDeadline(_DEADLINE_S)
    call, release = _ready_stream(session, deadline)
    try:
        expect_status(grpc.StatusCode.DEADLINE_EXCEEDED, lambda: list(call), "an Exec past its deadline", deadline)
    finally:
        release.set()
    session.require_status(session.exec_workspace(), "running", "after an Exec past its deadline")
    session.exec(session.commands.noop).require("an Exec after a deadline")


LATE_FRAME_TIMEOUT_S = 15  # a provider that reads on sees the late frame at once; one that does not never does


def _malformed(session: Session, what: str, frames: list[pb.ExecClientMessage], timeout: float = 60) -> None:
    expect_error("INVALID_ARGUMENT", lambda: session.exec_frames(frames, timeout=timeout), what)


def case_malformed_frames(session: Session) -> str:
    """Missing start, second start, unset payload, empty stdin, data after close_stdin, EOF before close_stdin."""
    ws = session.exec_workspace()
    start = start_frame(ws, session.commands.echo)
    close = pb.ExecClientMessage(close_stdin=pb.CloseStdin())
    cases = {
        "a stream without a start frame": [pb.ExecClientMessage(stdin=b"x"), close],
        "a second start frame": [start, start],
        "a frame with no payload set": [start, pb.ExecClientMessage()],
        "an empty stdin frame": [start, pb.ExecClientMessage(stdin=b"")],
        "end of stream before close_stdin": [start],
    }
    for what, frames in cases.items():
        _malformed(session, what, frames)
    # PROTOCOL.md's sixth case; the Go SDK suite does not send it (a provider may stop reading at close_stdin and
    # end the call OK): devsy policy, held to devsy's own providers. It is sent to a command that runs until
    # cancelled: an echo ends at close_stdin, and its exit would race the late frame (the call could end OK first).
    ready = session.commands.ready
    if ready is None:
        policy(False, f"stdin after close_stdin: the {session.commands.name!r} command table has no command that "
                      "outlives its input")
    else:
        late = [start_frame(ws, ready), close, pb.ExecClientMessage(stdin=b"x")]
        try:
            # A provider that stops reading at close_stdin lets that command run on: the bound keeps it short.
            _malformed(session, "stdin after close_stdin", late, timeout=LATE_FRAME_TIMEOUT_S)
        except CaseFailed as exc:
            policy(False, str(exc))
    session.require_status(ws, "running", "after the malformed streams")
    session.exec(session.commands.noop).require("an Exec after the malformed streams")
    return f"{len(cases) + 1} malformed streams rejected"


def case_tty_unsupported(session: Session) -> None:
    """tty=true is UNSUPPORTED unless offered (no provider offers it in this API)."""
    frames = [start_frame(session.exec_workspace(), session.commands.noop, tty=True),
              pb.ExecClientMessage(close_stdin=pb.CloseStdin())]
    expect_error("UNSUPPORTED", lambda: session.exec_frames(frames, timeout=UNARY_TIMEOUT_S), "Exec with tty=true")
