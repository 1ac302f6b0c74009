"""The shell programs an exec session runs in the guest (ssh/exec_sessions.py): a session's launcher (the user's
shell, account variables and folder, as sshd sets them up) and a forwarded connection's connector.

Kept apart from the exec-session server so the SSH master, which runs a session without a terminal with its own
driver (mux/driver_session.py), makes the same argv and environment without importing paramiko's server side.
"""

from __future__ import annotations

from collections.abc import Iterable

from devsy.devcontainer.session_env import UNSET_REQUEST, SessionEnv, unset_argv

# The session's process, run by the driver as the session's user: the user's shell from /etc/passwd (as sshd starts
# it), HOME/USER/LOGNAME/SHELL set unless the session's own env sets them (as the agent gives an explicit value
# precedence), started in the workspace folder (else the home, else /). Arguments: user, folder, the names the
# session's env sets (space-separated), then "login", "command" (then the command), "escaped" (then the command as
# printf %b escapes: bytes that are not UTF-8 cannot cross the engine's JSON as they are) or "words" (then the argv to
# exec: a session under a terminal, exec_terminal.py). POSIX sh only: busybox ash and dash run it as bash does.
_LAUNCH = r'''n=$1 w=$2 k=" $3 " m=$4; shift 4
h=/ s=/bin/sh
if [ -r /etc/passwd ]; then
  while IFS=: read -r pn _ pi _ _ ph ps || [ -n "$pn" ]; do
    if [ "$pn" = "$n" ] || [ "$pi" = "$n" ]; then n=$pn h=${ph:-/} s=${ps:-/bin/sh}; break; fi
  done < /etc/passwd
fi
[ -x "$s" ] || s=/bin/sh
case $k in *" HOME "*) ;; *) export HOME="$h" ;; esac
case $k in *" USER "*) ;; *) export USER="$n" ;; esac
case $k in *" LOGNAME "*) ;; *) export LOGNAME="$n" ;; esac
case $k in *" SHELL "*) ;; *) export SHELL="$s" ;; esac
cd "$w" 2>/dev/null || cd "${HOME:-$h}" 2>/dev/null || cd /
if [ "$m" = login ]; then exec "$s" -l; fi
if [ "$m" = words ]; then exec "$@"; fi
if [ "$m" = escaped ]; then c=$(printf '%bx' "$1"); set -- "${c%x}"; fi
exec "$s" -c "$1"'''
_ACCOUNT_NAMES = ("HOME", "USER", "LOGNAME", "SHELL")


def session_argv(user: str, workdir: str, command: str | None, words: list[str] | None = None,
                 env_names: Iterable[str] = ()) -> list[str]:
    """The exec argv of one session: `command` (None: a login shell) through the user's shell, or `words` run as
    they are once the user's environment is set up; `env_names` are the variables the session's env sets."""
    if words is not None:
        mode = ["words", *words]
    elif command is None:
        mode = ["login"]
    elif _is_utf8(command):
        mode = ["command", command]
    else:
        mode = ["escaped", _printf_escaped(command)]
    kept = " ".join(name for name in _ACCOUNT_NAMES if name in env_names)
    return ["/bin/sh", "-c", _LAUNCH, "devsy-session", user, workdir, kept, *mode]


def session_exec(user: str, workdir: str, command: str | None, env: SessionEnv,
                 words: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """One session's exec as `user`: its argv (session_argv, with `env`'s unset names removed) and its environment
    (`env`'s values). ExecSession runs every session this way, and so does the SSH master for a session without a
    terminal (mux/driver_session.py), so both run the same command in the same environment."""
    values = dict(env.values)
    return unset_argv(session_argv(user, workdir, command, words, values), env.unset), values


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # surrogateescape'd bytes from the SSH request (devsy/agent/guest/server.py _text)
        return False
    return True


def _printf_escaped(text: str) -> str:
    """`text`'s bytes as printf %b escapes (\\0NNN for each byte outside printable ASCII, and for backslashes)."""
    raw = text.encode("utf-8", "surrogateescape")
    return "".join(chr(b) if 32 <= b < 127 and b != 0x5C else f"\\0{b:03o}" for b in raw)


# The connector of a forwarded connection (arguments: host, port), with the first tool the guest has:
# - perl (Debian's perl-base is Essential, so every Debian and Ubuntu image has it): both directions copied, and the
#   client's end of input passed on as a half-close, as sshd does; the connection ends when the destination's side
#   ends (the copy towards it is then stopped);
# - nc (busybox images);
# - bash's /dev/tcp, which cannot half-close: the end of either direction ends the connection (a reply still on its
#   way after the client's end of input is cut short) rather than leave it open until the destination closes it.
#   (fd 4: a background job's stdin is /dev/null unless it names another descriptor.)
_PERL_CONNECT = r'''use IO::Socket::INET;
my $s = IO::Socket::INET->new(PeerAddr => $ARGV[0], PeerPort => $ARGV[1], Proto => "tcp")
  or die "connect to $ARGV[0]:$ARGV[1]: $!\n";
binmode STDIN; binmode STDOUT; $| = 1;
my $child = fork() // die "fork: $!\n";
if ($child == 0) {
  while (my $n = sysread($s, my $buf, 65536)) { my $o = 0; while ($o < $n) { $o += syswrite(STDOUT, $buf, $n - $o, $o) // exit 1 } }
  exit 0;
}
$SIG{CHLD} = sub { exit 0 };
while (my $n = sysread(STDIN, my $buf, 65536)) { my $o = 0; while ($o < $n) { $o += syswrite($s, $buf, $n - $o, $o) // last } }
shutdown($s, 1);
waitpid($child, 0);
exit 0;'''
_CONNECT = r'''h=$1 p=$2
if command -v perl >/dev/null 2>&1 && perl -MIO::Socket::INET -e 1 2>/dev/null; then
  exec perl -e "$DEVSY_CONNECT_PERL" "$h" "$p"
fi
if command -v nc >/dev/null 2>&1; then exec nc "$h" "$p"; fi
if command -v bash >/dev/null 2>&1; then
  exec bash -c 'exec 3<>"/dev/tcp/$0/$1" 4<&0 || exit 111; cat <&3 & r=$!; cat <&4 >&3 & w=$!; wait -n
    kill "$r" "$w" 2>/dev/null; exit 0' "$h" "$p"
fi
echo "the image has neither perl, nc nor bash to connect to $h:$p" >&2
exit 127'''


def connect_argv(host: str, port: int) -> list[str]:
    return ["/bin/sh", "-c", _CONNECT, "devsy-forward", host, str(port)]


# The perl program rides in the exec's environment, not in the argv devsy sends.
CONNECT_ENV = {"DEVSY_CONNECT_PERL": _PERL_CONNECT}


def session_environment(base: SessionEnv, requested: dict[str, str]) -> SessionEnv:
    """A session's env: `base` (the connection's remoteEnv, for OpenSSH) under the session's env requests, whose
    UNSET_REQUEST names what to remove (see devsy/devcontainer/session_env.py)."""
    explicit = {name: value for name, value in requested.items() if name != UNSET_REQUEST}
    unset = [*base.unset, *(name for name in requested.get(UNSET_REQUEST, "").split("\n") if name)]
    return SessionEnv(base.under(explicit), tuple(dict.fromkeys(n for n in unset if n not in explicit)))
