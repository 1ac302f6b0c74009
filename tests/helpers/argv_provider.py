"""A provider that records how it was launched, then serves devsy's fake runtime: for tests of what a host passes.

Each launch appends one JSON line to $ARGV_RECORD: its argv (after the program) and whether an ARGS variable reached
its environment. It also says its argv on stderr, so a test can check that a host's error messages mask it. The fake
runtime then serves with no arguments (the state dir and mode from DEVSY_FAKE_STATE_DIR / DEVSY_FAKE_MODE), as any
devsy provider does when a host starts it without `serve`.
"""

from __future__ import annotations

import json
import os
import sys

from devsy.runtime.fake.main import main

if __name__ == "__main__":
    with open(os.environ["ARGV_RECORD"], "a", encoding="utf-8") as record:
        record.write(json.dumps({"argv": sys.argv[1:], "ARGS": os.environ.get("ARGS")}) + "\n")
    print(f"argv-provider started with: {' '.join(sys.argv[1:])}", file=sys.stderr, flush=True)
    sys.exit(main([]))
