"""Finding and killing the process tree of one `docker exec`, and telling a signalled command from a plain exit.

Docker has no API to signal an exec'd process. So every exec runs under a tiny shell whose argv[0] carries a random
token (`devsy-exec-<token>`); /proc/PID/cmdline is world-readable, so a second exec (as root) can find that shell,
walk /proc/*/stat parent links to its descendants, freeze them all with SIGSTOP (so nothing forks away while we
look), look once more, and SIGKILL the lot. Only that tree dies; the container and its other processes stay.
"""

from __future__ import annotations

import os

TOKEN_PREFIX = "devsy-exec-"

# The shell must not `exec` the command (dash does that for a lone command under -c), or the token would vanish
# from the process table; it stays the command's parent. The wrapper's own stderr is /dev/null (the caller's stdout
# and stderr ride on fds 4 and 3 and are restored by a tiny inner shell right before it execs the command): a shell
# reports a signalled child ("Terminated") on its stderr, output the command never wrote.
#
# Whether the command was killed by a signal: `$?` is 128+N both for a signal and for `exit 128+N`, but the shell
# that waited for the command reports a signalled child on its own stderr and writes nothing else there. The
# command substitution captures exactly that report (never the command's output, which goes to fds 4/3) followed by
# the status; any report before it means "signalled". The wrapper then appends a trailer naming the signal number,
# framed by NULs and the exec's random token, as the last bytes it writes to stderr; the driver removes it (see
# exec_signal.py). POSIX shells do not report SIGINT and SIGPIPE deaths (dash and bash skip them on purpose): those
# two come back as the plain status 130 / 141 without a signal name.
_WRAPPER = ('shift\nt="$1"; shift\nexec 4>&1 3>&2 2>/dev/null\n'
            'r=$(exec 2>&1 1>&4; /bin/sh -c \'exec 2>&3 3>&- 4>&-; exec "$@"\' sh "$@"; echo " $?" >&2)\n'
            'c=${r##* }\n'
            'case $r in " $c") ;; *) [ "$c" -gt 128 ] &&\n'
            '  printf \'\\000devsy-signal-%s:%s\\000\' "$t" "$((c - 128))" >&3 ;; esac\n'
            'exit "$c"')

_KILL_TREE = r"""
marker="$1"
tree=""
for d in /proc/[0-9]*; do
  case "$(tr '\000' ' ' < "$d/cmdline" 2>/dev/null)" in
    '/bin/sh -c shift'*" sh $marker "*) tree="$tree ${d#/proc/}" ;;
  esac
done
[ -n "$tree" ] || { echo "killed 0"; exit 0; }
close_tree() {
  changed=1
  while [ "$changed" = 1 ]; do
    changed=0
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      case " $tree " in *" $p "*) continue ;; esac
      stat=$(cat "$d/stat" 2>/dev/null) || continue
      rest=${stat##*) }
      set -- $rest
      case " $tree " in *" $2 "*) tree="$tree $p"; changed=1 ;; esac
    done
  done
}
close_tree
kill -STOP $tree 2>/dev/null
close_tree
kill -KILL $tree 2>/dev/null
set -- $tree
echo "killed $#"
"""


def new_token() -> str:
    # Unique, not secret: os.urandom spares a provider the secrets module's OpenSSL import (10 ms before its Info).
    return os.urandom(8).hex()


def wrap(argv: list[str], token: str) -> list[str]:
    """The argv docker should run so that the command's tree can later be found by `token`."""
    # $0 stays "sh" so the shell's own messages read normally; the token rides as $1 and is shifted away.
    return ["/bin/sh", "-c", _WRAPPER, "sh", TOKEN_PREFIX + token, token, *argv]


def kill_tree_argv(token: str) -> list[str]:
    """An argv (to run as root in the same container) that kills the tree started by `wrap(..., token)`."""
    return ["/bin/sh", "-c", _KILL_TREE, "devsy-kill", TOKEN_PREFIX + token]
