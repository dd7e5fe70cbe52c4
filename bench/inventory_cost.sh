#!/usr/bin/env bash
# What the source's inventory (tools/runner/session/inventory.py) adds to every target: one more
# collection of its sources in a fresh process (imports included) with their conftests, without
# the target's args or ini file, which the runner runs beside the tests. Measured N times for each
# source given (default: the seeds' two sharded sources), through the test process's own entry
# (`python -m tools.runner.session.child --inventory FD`, its record written to a file on FD as
# the runner's stream would take it); wall and CPU seconds, cases recorded.
# Host-interpreter mode's interpreter (torch and pytest installed); writes
# RESULTS_DIR/inventory_cost.tsv.
# Usage: bench/inventory_cost.sh [PYTHON] [RUNS] [SOURCE...]
#        (default: $TORCH_TEST_PYTHON or python3, 3)
source "$(dirname "$0")/lib.sh"
python="${1:-${TORCH_TEST_PYTHON:-$(command -v python3)}}"
runs="${2:-3}"
shift 2 2>/dev/null || shift $#
sources=("$@")
((${#sources[@]})) || sources=(dynamo_tests/test_aot_autograd.py distributed_tests/test_dynamo_distributed.py)
RESULTS_FILE="${RESULTS_DIR}/inventory_cost.tsv"
: >"$RESULTS_FILE"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
printf '[pytest]\n' >"$scratch/empty.ini"

table_row source run wall_s cpu_s cases
for source in "${sources[@]}"; do
  for i in $(seq "$runs"); do
    PYTHONPATH=. PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=1 /usr/bin/time -o "$scratch/time" \
      -f '%e %U %S' "$python" -m tools.runner.session.child --inventory 3 \
      "$source" -c "$scratch/empty.ini" --rootdir="$PWD" --confcutdir="$PWD" -p tools.runner.session.plugin \
      -p no:cacheprovider -q >/dev/null 2>"$scratch/log" 3>"$scratch/record.json" || true
    read -r wall user sys < <(tail -n 1 "$scratch/time") # after "Command exited with ..."
    cases="$("$python" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["items"]))' "$scratch/record.json")"
    table_row "$source" "$i" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" "$cases"
  done
done
