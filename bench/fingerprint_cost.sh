#!/usr/bin/env bash
# Cost of the host-interpreter fingerprint (tools/python/env_fingerprint.sh), which tools/bazel
# runs on every command when TORCH_TEST_PYTHON is set (pinned mode never runs it). Target:
# <= 0.3 s warm. Prints how many files it stats and the wall and CPU time of N runs in a row;
# writes bench/results/fingerprint_cost.tsv.
# Usage: bench/fingerprint_cost.sh [PYTHON] [RUNS]   (default: $TORCH_TEST_PYTHON or python3, 5)
source "$(dirname "$0")/lib.sh"
python="${1:-${TORCH_TEST_PYTHON:-$(command -v python3)}}"
runs="${2:-5}"
RESULTS_FILE="${RESULTS_DIR}/fingerprint_cost.tsv"
: >"$RESULTS_FILE"
script=tools/python/env_fingerprint.sh

# Also warms the page cache, as the first command of a session does for every later one.
table_row python "$python" records "$("$script" "$python" --records | wc -l)"
# CPU seconds too: on a shared, loaded host they are the stable part of the wall time.
table_row run wall_s cpu_s
for i in $(seq "$runs"); do
  read -r wall user sys < <({ /usr/bin/time -f '%e %U %S' "$script" "$python" >/dev/null; } 2>&1)
  table_row "$i" "$wall" "$(echo "$user + $sys" | bc)"
done
