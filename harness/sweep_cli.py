"""`python -m harness sweep [--run-id ID | --all-owned] [--root DIR]`: remove what harness runs own."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.ownership import RunIdError, check_run_id
from harness.sweep import sweep_all_owned, sweep_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness sweep", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--run-id", help="sweep one run (its containers, volumes, directory, SSH blocks)")
    group.add_argument("--all-owned", action="store_true", help="sweep everything any harness run owns here")
    parser.add_argument("--root", type=Path, default=None, help="harness root (default $DEVSY_HARNESS_ROOT)")
    args = parser.parse_args(argv)
    if args.all_owned:
        report = sweep_all_owned(args.root)
    else:
        try:
            report = sweep_run(check_run_id(args.run_id), args.root)
        except RunIdError as exc:
            print(f"sweep: {exc}")
            return 2
    print(report.render())
    return 1 if report.errors else 0
