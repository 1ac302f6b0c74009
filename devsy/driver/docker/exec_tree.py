"""Finding and killing the process tree of one `docker exec`.

Docker has no API to signal an exec'd process. So every exec runs under a tiny shell whose argv[0] carries a random
token (`devsy-exec-<token>`); /proc/PID/cmdline is world-readable, so a second exec (as root) can find that shell,
walk /proc/*/stat parent links to its descendants, freeze them all with SIGSTOP (so nothing forks away while we
look), look once more, and SIGKILL the lot. Only that tree dies; the container and its other processes stay.
"""

from __future__ import annotations

import secrets

TOKEN_PREFIX = "devsy-exec-"

# The shell must not `exec` the command (dash does that for a lone command under -c), or the token would vanish
# from the process table; the trailing `exit $?` keeps it as the parent of the command. The wrapper's own stderr is
# /dev/null (the caller's stderr rides on fd 3 and is restored by a tiny inner shell right before it execs the
# command): otherwise dash reports a signalled command ("Terminated") on the command's stderr, output the command
# never wrote.
_WRAPPER = 'shift\nexec 3>&2 2>/dev/null\n/bin/sh -c \'exec 2>&3 3>&-; exec "$@"\' sh "$@"\nexit $?'

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
    return secrets.token_hex(8)


def wrap(argv: list[str], token: str) -> list[str]:
    """The argv docker should run so that the command's tree can later be found by `token`."""
    # $0 stays "sh" so the shell's own messages read normally; the token rides as $1 and is shifted away.
    return ["/bin/sh", "-c", _WRAPPER, "sh", TOKEN_PREFIX + token, *argv]


def kill_tree_argv(token: str) -> list[str]:
    """An argv (to run as root in the same container) that kills the tree started by `wrap(..., token)`."""
    return ["/bin/sh", "-c", _KILL_TREE, "devsy-kill", TOKEN_PREFIX + token]
