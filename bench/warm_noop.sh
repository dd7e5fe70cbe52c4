#!/usr/bin/env bash
# Warm no-op: `tools/bazel test //...` right after a complete run must serve every test from
# the cache. Prints the wall time of N consecutive no-op runs (target: <= 2 s each) and checks
# that no test was executed. Writes bench/results/warm_noop.tsv.
# Usage: bench/warm_noop.sh [RUNS]   (default 5)
source "$(dirname "$0")/lib.sh"
runs="${1:-5}"
RESULTS_FILE="${RESULTS_DIR}/warm_noop.tsv"
: >"$RESULTS_FILE"

"$BAZEL" test //... >"${RESULTS_DIR}/last_command.log" 2>&1 || {
  echo "the priming run failed; see ${RESULTS_DIR}/last_command.log" >&2
  exit 1
}
table_row run wall_s executed_tests
for i in $(seq "$runs"); do
  : >"${RESULTS_DIR}/last_command.log"
  wall="$(wall_seconds "$BAZEL" test //...)"
  executed="$(grep -Eo 'Executed [0-9]+ out of' "${RESULTS_DIR}/last_command.log" | grep -Eo '[0-9]+' | head -1)"
  table_row "$i" "$wall" "$executed"
done
