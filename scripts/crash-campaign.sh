#!/usr/bin/env bash
# scripts/crash-campaign.sh — the long crash campaign of docs/reliability.md:
# ROUNDS (default 100) consecutive rounds of load, SIGKILL at a random moment,
# restart and verify (crashtest TestCrash), then as many rounds with a power
# cut after each SIGKILL, on a FUSE file system that drops unsynced data
# (TestPowerLoss; skipped without /dev/fuse). The default test suite runs the
# same tests with 3 rounds each.
# Usage: scripts/crash-campaign.sh [extra go test flags]
#   ROUNDS=N                   rounds per test (default 100)
#   TESTS=regexp               tests to run (default ^(TestCrash|TestPowerLoss)$)
#   BUSBAR_CRASHTEST_SEED=S    repeat the random kill moments of a logged run
set -euo pipefail
cd "$(dirname "$0")/.."
export BUSBAR_CRASHTEST_ROUNDS="${ROUNDS:-100}"
go test -count=1 -timeout 180m -v -run "${TESTS:-^(TestCrash|TestPowerLoss)\$}" "$@" ./crashtest/
