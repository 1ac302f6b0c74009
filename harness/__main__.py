"""`python -m harness sweep ...`, `validate ...`, `shards ...` and `merge ...`."""

from __future__ import annotations

import sys

from harness import merge, shards, sweep_cli, validate


def main(argv: list[str]) -> int:
    commands = {"sweep": sweep_cli.main, "validate": validate.main, "shards": shards.main, "merge": merge.main}
    if not argv or argv[0] not in commands:
        print("usage: python -m harness {sweep [--run-id ID | --all-owned] | validate REPORT_DIR [--require P1,P2] "
              "| shards [--named-file FILE] | merge OUT REPORT_DIR...}")
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
