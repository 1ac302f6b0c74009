#!/usr/bin/env bash
# The test command (README): prepare this machine, run the tests, then the parity catalogue and its gate.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash ci/bootstrap.sh
# -n 2: these machines have two cores. -p no:cacheprovider: a clean clone stays clean.
# DEVSY_REQUIRE_ENGINE=1: the engine bootstrap started must answer; a docker test fails rather than skips without it.
# --durations: the slowest tests, in the log, for whoever keeps this job inside its time budget.
DEVSY_REQUIRE_ENGINE=1 .venv/bin/python -m pytest tests -n 2 -p no:cacheprovider -q --durations=15 "$@"
# The catalogue, gated: every case of the required providers must pass, and the report must cover the manifest.
# Both Docker providers are required (the built-in driver and devsy-provider-docker behind the protocol); the
# MicroSandbox providers run what this host can run (cases that need no booted VM) and are gated on KVM runners
# (ci/github/kvm-catalogue.yml). The simulated MicroSandbox columns (the real msb driver and
# devsy-provider-microsandbox on devsy-msb-sim, a stand-in backed by Docker) are required too: every case the
# stand-in can show must pass (15-18 min of wall time with -n 2 here, on top of ~15 today); they never count for
# MicroSandbox itself (harness/README.md).
required="builtin-docker,external-docker,remote-docker,builtin-microsandbox-sim,external-microsandbox-sim"
DEVSY_REPORT_DIR=reports/ci bash ci/catalogue.sh --devsy-require "$required"
.venv/bin/python -m harness validate reports/ci --require "$required"
