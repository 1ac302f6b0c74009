"""Terminals for exec sessions where the guest has busybox but no util-linux `script` (busybox images): busybox's
telnetd in inetd mode (-i) is the one program there that allocates a pty. It speaks telnet on the exec's stdin and
stdout, so this module is the host's half of that conversation, and of the session's start and end:

- To the guest, the session's input is telnet data: 0xFF (IAC) is doubled, and an IAC NOP follows a CR that
  precedes LF or NUL (telnetd drops the byte after a CR when it is LF or NUL, RFC 1123's end-of-line rule) or that
  ends a chunk, and a NUL that ends a chunk (busybox drops a NUL that ends one of its reads). Typed and pasted input
  thus reaches the pty as the client sent it. Bulk binary input is not exact: a NUL that happens to end one of
  telnetd's 2 KiB reads is still lost, and an IAC across its buffer's wrap may be misread (its own documented limit).
  A window size is a NAWS subnegotiation (RFC 1073), which telnetd sets on the pty (the kernel then signals SIGWINCH
  to the foreground job).
- From the guest, telnetd's option negotiation is dropped and IAC IAC is one 0xFF.
- telnetd runs a login program that devsy writes to a private folder under the guest's TMPDIR (else HOME, else
  /dev/shm: the first where it can be written and run; it removes the folder as its first step). That program sets
  the pty's size, then prints a `ready` marker and runs the session's command; after it, an `exit=N` marker with the
  command's status. The markers carry the session's nonce and are OSC sequences (a terminal ignores them). What
  telnetd prints before `ready` (its banner) is dropped, and the client's input is held until then, so its echo is
  not dropped with it. At `exit`, what follows is dropped and telnetd's input is closed: telnetd ends and whatever
  still holds the terminal is hung up, as sshd ends a pty session when its shell exits. A session whose exec has not
  ended LINGER_S after that is killed (exec_sessions.py).

As under `script`, a command killed by a signal is reported as status 128+N. The session's own processes can see the
nonce (it is in telnetd's argv), so they could end their output early with a forged marker: there is no privilege
boundary in that. A NAWS dimension whose low byte would be 255 is sent one less: busybox before 1.37 reads NAWS bytes
unescaped, later versions escaped, and only 254 reads the same.
"""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Callable
from typing import Any, BinaryIO

from devsy.ssh.tunnel import GatedInput

IAC, SB, SE, WILL, DONT, NAWS, NOP = 255, 250, 240, 251, 254, 31, 241
_IAC = bytes([IAC])
_NOP = bytes([IAC, NOP])
_CR_TO_SEPARATE = re.compile(rb"\r(?=[\n\x00]|\Z)")
LINGER_S = 10.0  # after the exit marker, how long telnetd may take to end once its input is closed

# Run by the session launcher (exec_commands._LAUNCH) as the session's user. Arguments: busybox, nonce, cols, rows,
# mode ("login" or "command"), command, the login program. The login program must be run from a folder mounted
# without noexec (telnetd execs it), which its `check` mode proves. The exit status only matters where the login
# program's exit marker never came (the program was killed): 255, as sshd's client reports a lost session.
_OUTER = r'''b=$1 n=$2 d=
for base in "${TMPDIR:-/tmp}" "$HOME" /dev/shm; do
  t=$base/devsy-pty-$n
  [ -n "$base" ] && mkdir -m 700 "$t" 2>/dev/null || continue
  if printf '%s\n' "$7" > "$t/login" && chmod 700 "$t/login" && DEVSY_PTY_MODE=check "$t/login" 2>/dev/null; then
    d=$t; break
  fi
  rm -rf "$t"
done
if [ -z "$d" ]; then
  echo "devsy: busybox telnetd needs a folder to run the terminal's login program from, and ${TMPDIR:-/tmp}, $HOME" \
    "and /dev/shm are read-only or mounted noexec" >&2
  exit 125
fi
DEVSY_PTY_DIR=$d DEVSY_PTY_NONCE=$n DEVSY_PTY_COLS=$3 DEVSY_PTY_ROWS=$4 DEVSY_PTY_MODE=$5 DEVSY_PTY_COMMAND=$6 \
  "$b" telnetd -i -f /dev/null -l "$d/login"
rm -rf "$d"
exit 255'''

# telnetd's login program: it gets no arguments, so its inputs ride in the environment, removed before the command.
# telnetd turns on tab expansion (XTABS); `tab0` gives tabs through as a pty from sshd does. A size of 0 (unknown,
# OpenSSH's -tt without a terminal) leaves the new pty's own 0x0, as the agent's pty does.
_LOGIN = r'''#!/bin/sh
[ "$DEVSY_PTY_MODE" = check ] && exit 0
d=$DEVSY_PTY_DIR n=$DEVSY_PTY_NONCE m=$DEVSY_PTY_MODE c=$DEVSY_PTY_COMMAND
rm -rf "$d"
stty tab0 2>/dev/null
[ "$DEVSY_PTY_COLS" = 0 ] || [ "$DEVSY_PTY_ROWS" = 0 ] || stty cols "$DEVSY_PTY_COLS" rows "$DEVSY_PTY_ROWS" 2>/dev/null
unset DEVSY_PTY_DIR DEVSY_PTY_NONCE DEVSY_PTY_MODE DEVSY_PTY_COMMAND DEVSY_PTY_COLS DEVSY_PTY_ROWS
printf '\033]devsy;%s;ready\007' "$n"
if [ "$m" = login ]; then "$SHELL" -l; else "$SHELL" -c "$c"; fi
printf '\033]devsy;%s;exit=%s\007' "$n" "$?"'''


def telnet_words(busybox: str, nonce: str, cols: int, rows: int, command: str | None) -> list[str]:
    """The words that run `command` (None: a login shell) on a pty of busybox's telnetd; they follow the session
    launcher's user lookup, which exports SHELL. A size of 0 (unknown) is passed on as it is, as under `script`."""
    mode = "login" if command is None else "command"
    return ["/bin/sh", "-c", _OUTER, "devsy-pty", busybox, nonce, str(cols), str(rows), mode, command or "", _LOGIN]


def escape_input(data: bytes) -> bytes:
    data = _CR_TO_SEPARATE.sub(b"\r" + _NOP, data.replace(b"\xff", b"\xff\xff"))
    return data + _NOP if data.endswith(b"\x00") else data


def naws(cols: int, rows: int) -> bytes:
    return bytes([IAC, SB, NAWS]) + struct.pack(">HH", _naws_safe(cols), _naws_safe(rows)) + bytes([IAC, SE])


def _naws_safe(value: int) -> int:
    value = max(0, min(value, 0xFEFE))
    return value - 1 if value & 0xFF == 0xFF else value


class _Decoder:
    """Telnet data to plain bytes, one chunk at a time (a command may be split across chunks)."""

    DATA, COMMAND, OPTION, SUBNEG, SUBNEG_IAC = range(5)

    def __init__(self) -> None:
        self._state = self.DATA

    def decode(self, data: bytes) -> bytes:
        if self._state == self.DATA and IAC not in data:
            return data  # nearly every chunk
        out, i, n = bytearray(), 0, len(data)
        while i < n:
            state = self._state
            if state == self.DATA:
                j = data.find(_IAC, i)
                if j < 0:
                    out += data[i:]
                    break
                out += data[i:j]
                i, self._state = j + 1, self.COMMAND
                continue
            if state == self.SUBNEG:
                j = data.find(_IAC, i)
                if j < 0:
                    break
                i, self._state = j + 1, self.SUBNEG_IAC
                continue
            byte, i = data[i], i + 1
            if state == self.COMMAND:
                if byte == IAC:
                    out.append(IAC)
                    self._state = self.DATA
                elif WILL <= byte <= DONT:
                    self._state = self.OPTION
                elif byte == SB:
                    self._state = self.SUBNEG
                else:
                    self._state = self.DATA  # a two-byte command (NOP, AYT, ...)
            elif state == self.OPTION:
                self._state = self.DATA
            else:  # SUBNEG_IAC
                self._state = self.DATA if byte == SE else self.SUBNEG
        return bytes(out)


class TelnetOutput(io.RawIOBase):
    """The exec's stdout under telnetd: decoded, and cut to what lies between the login program's two markers."""

    STARTING, RUNNING, ENDED = range(3)

    def __init__(self, sink: BinaryIO, nonce: str, *, on_ready: Callable[[], None],
                 on_exit: Callable[[], None]) -> None:
        super().__init__()
        self._sink, self._on_ready, self._on_exit = sink, on_ready, on_exit
        self._decoder = _Decoder()
        self._ready = f"\x1b]devsy;{nonce};ready\x07".encode()
        self._exit_start = f"\x1b]devsy;{nonce};exit=".encode()
        self._exit = re.compile(re.escape(self._exit_start) + rb"(\d{1,3})\x07")
        self._held = b""  # decoded bytes not passed on yet: they may begin a marker
        self._phase = self.STARTING
        self.status: int | None = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:  # type: ignore[override]
        size = len(data)
        if self._phase == self.ENDED:
            return size
        text = self._held + self._decoder.decode(bytes(data))
        if self._phase == self.STARTING:
            start = text.find(self._ready)
            if start < 0:
                self._held = text[-(len(self._ready) - 1):]  # telnetd's banner: dropped
                return size
            text, self._phase = text[start + len(self._ready):], self.RUNNING
            self._on_ready()
        end = self._exit.search(text)
        if end is not None:
            self._held = b""
            self._pass_on(text[:end.start()])
            self._phase, self.status = self.ENDED, int(end.group(1))
            self._on_exit()
            return size
        keep = self._marker_prefix_length(text)
        self._held = text[len(text) - keep:] if keep else b""
        self._pass_on(text[:len(text) - keep])
        return size

    def _marker_prefix_length(self, text: bytes) -> int:
        """How many of `text`'s last bytes may begin the exit marker (which has one ESC, its first byte)."""
        limit = len(self._exit_start) + 4  # the marker's fixed part, three digits and its BEL
        start = text.rfind(b"\x1b", max(0, len(text) - limit))
        if start < 0:
            return 0
        tail = text[start:]
        fixed = self._exit_start
        if fixed.startswith(tail) or (tail.startswith(fixed) and tail[len(fixed):].isdigit()):
            return len(tail)
        return 0

    def finish(self) -> None:
        """The exec has ended: bytes held as a possible marker's start were no marker."""
        if self._phase == self.RUNNING and self._held:
            held, self._held = self._held, b""
            self._pass_on(held)

    def _pass_on(self, data: bytes) -> None:
        if data:
            self._sink.write(data)


class TelnetTerminal:
    """The streams of one session under telnetd: its input (gated until `ready`, closed at `exit`) and output.
    `on_exit` is told when the exit marker has come."""

    def __init__(self, channel: Any, sink: BinaryIO, nonce: str, on_exit: Callable[[], None]) -> None:
        self.input = GatedInput(channel.fileno(), read=channel.recv, encode=escape_input, hold_at_eof=True)
        self._on_exit = on_exit
        self.output = TelnetOutput(sink, nonce, on_ready=self.input.open_gate, on_exit=self._exited)

    def _exited(self) -> None:
        self.input.close()
        self._on_exit()

    def resize(self, cols: int, rows: int) -> None:
        self.input.push(naws(cols, rows))

    @property
    def status(self) -> int | None:
        """The command's exit status, once the login program has reported it."""
        return self.output.status
