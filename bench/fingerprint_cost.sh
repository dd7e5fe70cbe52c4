#!/usr/bin/env bash
# Cost of the environment fingerprint (tools/python/env_fingerprint.sh), which tools/bazel runs
# on every command: of the whole environment in host-interpreter mode (TORCH_TEST_PYTHON), of
# the interpreter's binary and stdlib in pinned mode. Digests are of content, memoised by stat:
#   cold   no memo (a fresh XDG_CACHE_HOME): every file read and hashed, as on a new host or
#          after an image update (the page cache is left as it is)
#   warm   the memo of the run before: one stat per file (target: <= 1 s, the no-op budget)
# Prints how many files it covers and the wall and CPU time of N runs of each; writes
# bench/results/fingerprint_cost.tsv.
# Usage: bench/fingerprint_cost.sh [PYTHON] [RUNS]   (default: $TORCH_TEST_PYTHON or python3, 3)
source "$(dirname "$0")/lib.sh"
python="${1:-${TORCH_TEST_PYTHON:-$(command -v python3)}}"
runs="${2:-3}"
RESULTS_FILE="${RESULTS_DIR}/fingerprint_cost.tsv"
: >"$RESULTS_FILE"
script=tools/python/env_fingerprint.sh
memo_root="$(mktemp -d)"
trap 'rm -rf "$memo_root"' EXIT

# timed MODE RUN FLAGS...: one row; CPU seconds too, the stable part of the wall on a loaded host.
timed() {
  local mode="$1" run="$2" wall user sys
  shift 2
  read -r wall user sys < <({ /usr/bin/time -f '%e %U %S' "$script" "$python" "$@" >/dev/null; } 2>&1)
  table_row "$mode" "$run" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')"
}

"$script" "$python" --stdlib-only >/dev/null # fails here, not as empty rows, if it cannot run
table_row python "$python"
for scope in host --stdlib-only; do
  flags=()
  [[ $scope == host ]] || flags=("$scope")
  table_row scope "$scope" files "$("$script" "$python" "${flags[@]}" --records | wc -l)"
  table_row mode run wall_s cpu_s
  for i in $(seq "$runs"); do
    XDG_CACHE_HOME="$memo_root/cold$i$scope" timed cold "$i" "${flags[@]}"
  done
  export XDG_CACHE_HOME="$memo_root/warm"
  "$script" "$python" "${flags[@]}" >/dev/null # fills the memo
  for i in $(seq "$runs"); do timed warm "$i" "${flags[@]}"; done
  unset XDG_CACHE_HOME
done
