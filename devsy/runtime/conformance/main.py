"""`devsy-conformance [OPTIONS] PROVIDER [ARGS...]`: run every conformance case of shared/PROTOCOL.md against a
provider executable (Python- or Go-built), launched like a host does: exactly `PROVIDER ARGS...` under the runtime
supervisor, with the go-plugin handshake: nothing is added (devsy's own providers take `serve`: `devsy-conformance
devsy-provider-docker serve`; a go-plugin provider its own flags: `devsy-conformance go-fake-runtime --state-dir X`).
Prints one PASS/FAIL/SKIP/BLOCKED line per case.

SKIP: the provider does not offer what the case needs (it says so in Info). BLOCKED: the case needs a running
instance and the provider reported that none can boot on this host (e.g. a microVM where KVM cannot run guests); the
line carries the provider's evidence. Exit status: 0 when every case passed or was skipped, 1 on any failure, 3 when
nothing failed but some cases were blocked (the run is incomplete: repeat it where instances boot).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from devsy.errors import DevsyError
from devsy.runtime.conformance import cases_exec as ex
from devsy.runtime.conformance import cases_lifecycle as lc
from devsy.runtime.conformance import cases_validation as va
from devsy.runtime.conformance.checks import CaseBlocked, CaseFailed, CaseSkipped
from devsy.runtime.conformance.session import LABEL_RUN, Session, Target
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.wire.status import DetailError, from_error

DEFAULT_IMAGE = "devsy-guest:bookworm"
EXIT_BLOCKED = 3
STATUSES = ("PASS", "FAIL", "SKIP", "BLOCKED")


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[Session], object]


CASES: tuple[Case, ...] = (
    Case("info", lc.case_info),
    Case("discovery", lc.case_discovery),
    Case("validation/invalid-requests", va.case_invalid_requests),
    Case("validation/absent-workspace", va.case_absent_workspace),
    Case("lifecycle", lc.case_lifecycle),
    Case("reuse-preflight", lc.case_reuse_preflight),
    Case("recreate-on-run", lc.case_recreate_on_run),
    Case("exec/binary-echo", ex.case_binary_echo),
    Case("exec/empty-stdin", ex.case_empty_stdin),
    Case("exec/argument-fidelity", ex.case_argument_fidelity),
    Case("exec/shell", ex.case_shell),
    Case("exec/stderr-only", ex.case_stderr_only),
    Case("exec/full-duplex-12mib", ex.case_full_duplex),
    Case("exec/nonzero-exit", ex.case_nonzero_exit),
    Case("exec/signal-exit", ex.case_signal_exit),
    Case("exec/early-exit", ex.case_early_exit),
    Case("exec/cancel", ex.case_cancel),
    Case("exec/deadline", ex.case_deadline),
    Case("exec/malformed-frames", ex.case_malformed_frames),
    Case("exec/tty-unsupported", ex.case_tty_unsupported),
    Case("logs", lc.case_logs),
)


@dataclass
class Outcome:
    name: str
    status: str  # one of STATUSES
    seconds: float
    note: str = ""


def _describe_rpc_error(exc: grpc.RpcError) -> str:
    try:
        info = from_error(exc)
    except DetailError as detail_exc:
        return f"unexpected {exc.code().name} with a malformed status ({detail_exc})"  # type: ignore[attr-defined]
    if info is None:
        return f"unexpected {exc.code().name} without RuntimeError: {exc.details()}"  # type: ignore[attr-defined]
    return f"unexpected {info.code}: {info.message}"


def run_case(session: Session, case: Case) -> Outcome:
    started = time.monotonic()
    session.current_case = case.name
    try:
        if not session.healthy():
            session.launch()  # a previous case may have crashed the provider; each case gets a live one
        note = case.run(session)
        status, text = "PASS", str(note or "")
    except CaseSkipped as exc:
        status, text = "SKIP", str(exc)
    except CaseBlocked as exc:
        status, text = "BLOCKED", str(exc)
    except (CaseFailed, AssertionError) as exc:
        status, text = "FAIL", str(exc)
    except grpc.RpcError as exc:
        status, text = "FAIL", _describe_rpc_error(exc)
    except DevsyError as exc:
        status, text = "FAIL", exc.message
    except Exception as exc:  # noqa: BLE001 - a crash of one case must not hide the others
        status, text = "FAIL", f"{type(exc).__name__}: {exc}"
    return Outcome(case.name, status, time.monotonic() - started, text)


def run_suite(target: Target, only: list[str], out=sys.stdout) -> list[Outcome]:
    session = Session(target)
    outcomes: list[Outcome] = []
    session.launch()  # a provider that cannot start fails the run once, not once per case
    # Named so that a leftover can be traced to its run (several runs may share one engine).
    print(f"run {session.run_id}: workspaces conf-{session.run_id}-*, label {LABEL_RUN}={session.run_id}", file=out,
          flush=True)
    try:
        for case in CASES:
            if only and not any(case.name == o or case.name.startswith(o + "/") for o in only):
                continue
            outcome = run_case(session, case)
            outcomes.append(outcome)
            note = f": {outcome.note}" if outcome.note else ""
            print(f"{outcome.status:4}  {outcome.name} ({outcome.seconds:.2f}s){note}", file=out, flush=True)
    finally:
        errors = session.cleanup()
        session.close()
    for error in errors:
        print(f"FAIL  cleanup: {error}", file=out, flush=True)
        outcomes.append(Outcome("cleanup", "FAIL", 0.0, error))
    return outcomes


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {key!r} without '='")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="devsy-conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"image for RunImage (default {DEFAULT_IMAGE})")
    parser.add_argument("--env", action="append", type=_key_value, default=[], metavar="KEY=VALUE",
                        help="provider environment (provider options), repeatable; e.g. NETWORK_MODE=host")
    parser.add_argument("--remote-user", default="root", help="developer identity the workspaces are created for")
    parser.add_argument("--only", action="append", default=[], metavar="CASE",
                        help="run only this case or group (e.g. exec), repeatable")
    parser.add_argument("--handshake-timeout", type=float, default=60.0)
    parser.add_argument("provider", metavar="PROVIDER", help="provider executable (name on PATH or path)")
    parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="the provider's arguments, passed exactly as given (nothing is added)")
    args = parser.parse_args(argv)
    binary = shutil.which(args.provider) or args.provider
    target = Target(command=ProviderCommand(binary=binary, args=list(args.args), env=dict(args.env)), image=args.image,
                    remote_user=args.remote_user, handshake_timeout=args.handshake_timeout)
    try:
        outcomes = run_suite(target, args.only)
    except DevsyError as exc:
        print(f"FAIL  launch: {exc}", flush=True)
        return 1
    counts = {s: sum(o.status == s for o in outcomes) for s in STATUSES}
    summary = f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped"
    if counts["BLOCKED"]:
        blocked = [o.name for o in outcomes if o.status == "BLOCKED"]
        print(f"{summary}, {counts['BLOCKED']} blocked: need a booted instance, which this host cannot provide "
              f"({', '.join(blocked)}); run them where instances boot")
        return 1 if counts["FAIL"] else EXIT_BLOCKED
    print(summary)
    return 1 if counts["FAIL"] or not outcomes else 0


if __name__ == "__main__":
    sys.exit(main())
