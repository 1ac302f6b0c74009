"""Terminals for exec sessions (devsy/ssh/exec_sessions.py): a driver exec has no pseudo-terminal, so the session runs
under a program in the guest that gives its command one.

- util-linux's `script` (every Debian and Ubuntu image: it is in bsdutils, an Essential package). The pty's size is
  set when it starts, and a resize is one more exec that sets the new size on that pty (the kernel then sends
  SIGWINCH to its foreground job, as on any terminal).
- Else busybox's telnetd (busybox images), which speaks telnet on the exec's streams: exec_telnet.py.

The helper found is kept in the agent note as its path, or as "<busybox path> telnetd". An image with neither (a
busybox built without telnetd, as Alpine's) gets no terminal: a pty request is refused, as sshd refuses one it cannot
give.
"""

from __future__ import annotations

import io
import shlex

from devsy.driver.base import CancelToken, Driver, ExecRequest

# Prints the path of util-linux's `script` (its -e returns the command's exit status; busybox's has no -e), else that
# of the first busybox in PATH followed by " telnetd" if it has telnetd. (busybox's own sh answers `command -v busybox`
# with the bare name, its applets being builtins there, so PATH is searched here.)
_PROBE = r'''if p=$(command -v script) && script --version 2>/dev/null | grep -q util-linux; then
  printf %s "$p"; exit 0
fi
IFS=:
for d in $PATH; do
  [ -f "$d/busybox" ] && [ -x "$d/busybox" ] || continue
  if "$d/busybox" --list 2>/dev/null | grep -qx telnetd; then printf '%s telnetd' "$d/busybox"; fi
  exit 0
done'''
_TELNETD = " telnetd"

# Runs inside `script`, as `$SHELL -c`: the size first (the pty starts at 0x0), then the session's program. The nonce
# rides in this shell's argv, so a resize can find the pty (its stdin) from /proc. The program is not exec'd: this
# shell stays to carry the nonce, and passes the program's status on. Arguments: nonce, cols, rows, command ("" for
# a login shell).
_INNER = r'''stty cols "$1" rows "$2" 2>/dev/null
if [ -z "$3" ]; then "$SHELL" -l; else "$SHELL" -c "$3"; fi'''

# Run as the session's user: the first process whose argv holds the nonce and whose stdin takes the size (the
# session's pty; `script` itself matches too, with a pipe as its stdin).
_RESIZE = r'''n=$1 c=$2 r=$3
for d in /proc/[0-9]*; do
  case "$(tr '\000' ' ' < "$d/cmdline" 2>/dev/null)" in
    *"devsy-pty-$n "*) stty cols "$c" rows "$r" < "$d/fd/0" 2>/dev/null && exit 0 ;;
  esac
done
exit 1'''


def find_terminal_helper(driver: Driver, workspace_id: str, cancel: CancelToken) -> str:
    """The guest's util-linux `script`, else its busybox telnetd, or "" when it has neither (then exec sessions have
    no terminal)."""
    out = io.BytesIO()
    result = driver.exec(workspace_id, ExecRequest(argv=["/bin/sh", "-c", _PROBE], stdout=out, stderr=io.BytesIO(),
                                                   cancel=cancel))
    path = out.getvalue().decode("utf-8", "replace").strip()
    return path if result.exit_code == 0 and path.startswith("/") else ""


def telnet_busybox(helper: str) -> str:
    """The busybox whose telnetd `helper` names, or "" when `helper` is util-linux's `script`."""
    return helper.removesuffix(_TELNETD) if helper.endswith(_TELNETD) else ""


def under_terminal(script: str, nonce: str, cols: int, rows: int, command: str | None) -> list[str]:
    """The words that run `command` (None: a login shell) on a pty of the given size; they follow the session
    launcher's user lookup, which exports SHELL."""
    inner = shlex.join(["sh", "-c", _INNER, f"devsy-pty-{nonce}", str(cols), str(rows), command or ""])
    return [script, "-q", "-e", "-f", "-c", inner, "/dev/null"]


def resize_argv(nonce: str, cols: int, rows: int) -> list[str]:
    return ["/bin/sh", "-c", _RESIZE, "devsy-resize", nonce, str(cols), str(rows)]
