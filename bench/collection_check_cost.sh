#!/usr/bin/env bash
# What the shards' collection check (tools/runner/collection.py) adds to each shard of a
# sharded target: one more collection of its file in a fresh process (imports included), which
# the runner runs beside the tests. Measured for every sharded source, N times each, through
# the runner's own entry (`pytest_runner.py --collection-check`); wall and CPU seconds.
# Host-interpreter mode's interpreter (torch and pytest installed); writes
# RESULTS_DIR/collection_check_cost.tsv.
# Usage: bench/collection_check_cost.sh [PYTHON] [RUNS]   (default: $TORCH_TEST_PYTHON or python3, 3)
source "$(dirname "$0")/lib.sh"
python="${1:-${TORCH_TEST_PYTHON:-$(command -v python3)}}"
runs="${2:-3}"
RESULTS_FILE="${RESULTS_DIR}/collection_check_cost.tsv"
: >"$RESULTS_FILE"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
sources=(dynamo_tests/test_aot_autograd.py distributed_tests/test_dynamo_distributed.py)

table_row source run wall_s cpu_s ids
for source in "${sources[@]}"; do
  for i in $(seq "$runs"); do
    PYTHONPATH=. PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=1 /usr/bin/time -o "$scratch/time" \
      -f '%e %U %S' "$python" tools/runner/pytest_runner.py --collection-check \
      "$scratch/record.json" "$source" -p test_utils.pytest_plugin -p no:cacheprovider \
      >/dev/null 2>"$scratch/log" || true
    read -r wall user sys < <(tail -n 1 "$scratch/time") # after "Command exited with ..."
    ids="$("$python" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$scratch/record.json")"
    table_row "$source" "$i" "$wall" "$(echo "$user + $sys" | bc)" "$ids"
  done
done
