#!/usr/bin/env bash
# The main job (README): prepare this machine, run the parity catalogue against every provider, print the report.
# Extra arguments go to pytest, e.g. --devsy-require builtin-docker or --devsy-case 'lifecycle/recreate'.
# DEVSY_REPORT_DIR chooses the report folder (default reports/catalogue-<UTC time>).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash ci/bootstrap.sh
report="${DEVSY_REPORT_DIR:-reports/catalogue-$(date -u +%Y%m%dT%H%M%SZ)}"
status=0
.venv/bin/python -m pytest scenarios -n 2 -p no:cacheprovider -q --devsy-report "$report" "$@" || status=$?
echo
echo "parity table: $(realpath -m "$report")/parity.md (also parity.html; report.json, junit.xml beside them)"
exit "$status"
