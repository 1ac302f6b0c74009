"""`devsy-conformance [OPTIONS] PROVIDER [ARGS...]`: run every conformance case of shared/PROTOCOL.md against a
provider executable (Python- or Go-built), launched like a host does: exactly `PROVIDER ARGS...` under the runtime
supervisor, with the go-plugin handshake: nothing is added (devsy's own providers take `serve`: `devsy-conformance
devsy-provider-docker serve`; a go-plugin provider its own flags: `devsy-conformance go-fake-runtime --state-dir X`).
Prints one PASS/FAIL/SKIP/BLOCKED line per case.

SKIP: the provider does not offer what the case needs (it says so in Info). BLOCKED: the case needs a running
instance and the provider reported that none can boot on this host (e.g. a microVM where KVM cannot run guests); the
line carries the provider's evidence. NOT-OFFERED: the protocol's checks passed, but devsy policy (stricter than the
protocol; see --policy) does not hold for this provider; the line names each such check. Exit status: 0 when every
case passed or was skipped, 1 on any failure, 3 when nothing failed but some cases were blocked (the run is
incomplete: repeat it where instances boot), 4 when nothing failed or was blocked but some cases were not offered.

The exec cases send commands from a per-provider table (--commands), as the Go SDK's suite does: real POSIX
commands for real backends, scenario names for fakes.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import grpc

from devsy.errors import DevsyError
from devsy.runtime.conformance import cases_exec as ex
from devsy.runtime.conformance import cases_lifecycle as lc
from devsy.runtime.conformance import cases_validation as va
from devsy.runtime.conformance import commands as c
from devsy.runtime.conformance.checks import CaseBlocked, CaseFailed, CaseNotOffered, CaseSkipped, policy_scope
from devsy.runtime.conformance.session import LABEL_RUN, Session, Target
from devsy.runtime.host.launcher import ProviderCommand
from devsy.runtime.wire.status import DetailError, from_error

DEFAULT_IMAGE = "devsy-guest:bookworm"
EXIT_BLOCKED = 3
EXIT_NOT_OFFERED = 4
STATUSES = ("PASS", "FAIL", "SKIP", "BLOCKED", "NOT-OFFERED")


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
        with policy_scope(session.target.devsy_policy) as waived:
            note = case.run(session)
        if waived:
            raise CaseNotOffered("protocol checks passed; devsy policy (held to devsy's own providers) not offered: "
                                 + "; ".join(waived))
        status, text = "PASS", str(note or "")
    except CaseSkipped as exc:
        status, text = "SKIP", str(exc)
    except CaseNotOffered as exc:
        status, text = "NOT-OFFERED", str(exc)
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
    checks = "protocol and devsy policy" if target.devsy_policy else "protocol"
    print(f"commands: {target.commands.name}; checks: {checks}", file=out, flush=True)
    try:
        session.check_info()
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
    parser.add_argument("--commands", choices=sorted(c.TABLES), default=None,
                        help="what the exec cases send: posix (real commands: cat, printf, sh -c; for providers "
                             "backed by real containers), pyfake (what devsy-fake-runtime simulates), gofake (the Go "
                             "SDK fake's scenario names: go-fake-runtime or devsy-fake-runtime in --mode "
                             "conformance). Default: by the provider's file name (devsy-fake-runtime: pyfake, or "
                             "gofake with --mode conformance; go-fake-runtime: gofake; any other: posix)")
    parser.add_argument("--policy", choices=("devsy", "protocol"), default=None,
                        help="devsy: also hold the provider to devsy policy (stricter than the protocol: exactly one "
                             "RuntimeError detail on every error, workspace ids of [A-Za-z0-9_.-], data after "
                             "close_stdin refused); a case whose protocol checks pass but whose policy checks do not "
                             "apply is NOT-OFFERED. protocol: the protocol alone. Default: devsy for devsy's own "
                             "providers (devsy-*), protocol for any other")
    parser.add_argument("provider", metavar="PROVIDER", help="provider executable (name on PATH or path)")
    parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="the provider's arguments, passed exactly as given (nothing is added)")
    args = parser.parse_args(argv)
    binary = shutil.which(args.provider) or args.provider
    target = Target(command=ProviderCommand(binary=binary, args=list(args.args), env=dict(args.env)), image=args.image,
                    remote_user=args.remote_user, handshake_timeout=args.handshake_timeout)
    table = args.commands or c.default_table(binary, list(args.args))
    strict = args.policy == "devsy" if args.policy else c.devsy_built(binary)
    target = replace(target, commands=c.TABLES[table], devsy_policy=strict)
    try:
        outcomes = run_suite(target, args.only)
    except DevsyError as exc:
        print(f"FAIL  launch: {exc}", flush=True)
        return 1
    counts = {s: sum(o.status == s for o in outcomes) for s in STATUSES}
    summary = f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped"
    if counts["NOT-OFFERED"]:
        summary += f", {counts['NOT-OFFERED']} not offered by this provider"
    if counts["BLOCKED"]:
        blocked = [o.name for o in outcomes if o.status == "BLOCKED"]
        print(f"{summary}, {counts['BLOCKED']} blocked: need a booted instance, which this host cannot provide "
              f"({', '.join(blocked)}); run them where instances boot")
        return 1 if counts["FAIL"] else EXIT_BLOCKED
    print(summary)
    if counts["FAIL"] or not outcomes:
        return 1
    return EXIT_NOT_OFFERED if counts["NOT-OFFERED"] else 0


if __name__ == "__main__":
    sys.exit(main())
