"""`devsy-fake-runtime serve --state-dir DIR [--mode MODE] [--profile PROFILE]`: the conformance fixture.

A provider executable whose workspaces are JSON records in DIR and whose exec is simulated by scenario name. Modes
make it misbehave on purpose (see modes.py); the `recreate` profile offers ON_RUN to hosts that opt in, the `legacy`
profile speaks API 1.1 (no ReusePreflight, no ON_RUN). Mode and profile can also come from DEVSY_FAKE_MODE /
DEVSY_FAKE_PROFILE, and the state dir from DEVSY_FAKE_STATE_DIR.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from devsy.errors import DevsyError
from devsy.process_exit import skip_final_collection
from devsy.runtime.fake.modes import CRASH_EXIT_CODE, ENV_MODE, ENV_PROFILE, PROFILES, Mode, Profile
from devsy.runtime.fake.state import StateStore
from devsy.runtime.sdk import ProviderInfo, require_serve_command, serve_deferred

PROG = "devsy-fake-runtime"
VERSION = "1.0.0"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"{PROG} serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--state-dir", type=Path, default=os.environ.get("DEVSY_FAKE_STATE_DIR") or None,
                        help="directory of workspace records (required; or DEVSY_FAKE_STATE_DIR)")
    parser.add_argument("--mode", type=Mode, choices=list(Mode), default=Mode(os.environ.get(ENV_MODE) or "normal"),
                        help="misbehave on purpose; `conformance`: exec argv[0] names a scenario of the Go SDK fake "
                             "(echo, arguments, shell, stderr, duplex, nonzero, signal, early-exit, block). The Go "
                             "fake's names delay-handshake, fail-preflight, fail-run, exec-nonzero are accepted too")
    parser.add_argument("--profile", type=Profile, choices=list(Profile),
                        default=Profile(os.environ.get(ENV_PROFILE) or "default"),
                        help="recreate: offer ON_RUN replacement to hosts that opt in; legacy: speak API 1.1")
    parser.add_argument("--handshake-delay", type=float, default=3600.0,
                        help="seconds the slow-handshake mode waits before its handshake line")
    return parser


def main(argv: list[str] | None = None) -> int:
    rest = require_serve_command(PROG, sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(rest)
    if args.state_dir is None:
        print(f"{PROG}: --state-dir is required", file=sys.stderr)
        return 2
    mode: Mode = args.mode
    if mode is Mode.CRASH_BEFORE_HANDSHAKE:
        print(f"{PROG}: crashing before the handshake on purpose (mode {mode.value})", file=sys.stderr)
        return CRASH_EXIT_CODE
    if mode is Mode.BAD_HANDSHAKE_LINE:
        print("fake runtime says hello instead of a handshake line", flush=True)
        return 0
    try:
        store = StateStore(args.state_dir)  # an unusable state dir exits before the handshake
    except DevsyError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    profile = PROFILES[args.profile]
    info = ProviderInfo(
        driver_name="" if mode is Mode.MALFORMED_INFO else "fake", driver_version=VERSION,
        runtime_name=PROG, runtime_version=VERSION, recreate_on_run=profile.recreate_on_run,
        api_major=2 if mode is Mode.INCOMPATIBLE_VERSION else 1,
        api_minor=profile.api_minor)
    before = (lambda: time.sleep(args.handshake_delay)) if mode is Mode.SLOW_HANDSHAKE else None
    after = (lambda: os._exit(CRASH_EXIT_CODE)) if mode is Mode.CRASH_AFTER_HANDSHAKE else None
    code = serve_deferred(lambda: (_driver(store, mode), info), before_line=before, after_line=after)
    skip_final_collection()  # this process ends now, and its host waits for that
    return code


def _driver(store: StateStore, mode: Mode):
    """After the handshake line: the driver and what it imports (the driver types, the scenario tables)."""
    from devsy.runtime.fake.driver import FakeDriver

    return FakeDriver(store, mode)


if __name__ == "__main__":
    sys.exit(main())
