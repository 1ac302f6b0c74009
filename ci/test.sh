#!/usr/bin/env bash
# The test command (README): prepare this machine, run the tests, then the parity catalogue with its gate.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash ci/bootstrap.sh
# -n 2: these machines have two cores. -p no:cacheprovider: a clean clone stays clean.
.venv/bin/python -m pytest tests -n 2 -p no:cacheprovider -q "$@"
