"""The exec guard's own process (see exec_guard): wait for the owner's end; unless it said `done`, run the kill plan.

Run as a script under `python -I -S`: only the standard library until a kill is due (most guards just read `done`
and exit), and then the owner's sys.path, which it sends with the plan, to import the plan's function.
"""

import importlib
import json
import signal
import sys

DONE = b"done\n"
# The whole kill (imports, engine calls) must end within this; the default SIGALRM action then ends us.
KILL_BUDGET_S = 20


def _run(plan_line: bytes, updates: bytes) -> None:
    plan = json.loads(plan_line)
    for line in updates.splitlines():  # arguments the owner learnt after the start (e.g. the engine's exec id)
        plan["args"].update(json.loads(line)["args"])
    sys.path[:] = plan["path"]
    module, _, function = plan["action"].partition(":")
    getattr(importlib.import_module(module), function)(**plan["args"])


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # not ours to act on: only the owner's end matters
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    stdin = sys.stdin.buffer
    plan_line = stdin.readline()
    rest = stdin.read()  # until the owner closes its end, or dies
    if rest.endswith(DONE) or not plan_line.endswith(b"\n"):
        return 0
    signal.alarm(KILL_BUDGET_S)
    try:
        _run(plan_line, rest)
    except Exception:  # noqa: BLE001 - nobody is left to tell (stderr is /dev/null); the status is all there is
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
