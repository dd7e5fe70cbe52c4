# Shared helpers for bench/*.sh. Source it; it cd's to the workspace root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
readonly BAZEL="${BAZEL:-tools/bazel}"
readonly RESULTS_DIR="${RESULTS_DIR:-bench/results}"
mkdir -p "$RESULTS_DIR"

# wall_seconds CMD...: runs CMD (output to a log), prints its wall time in seconds.
wall_seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" >>"${RESULTS_DIR}/last_command.log" 2>&1 || { echo "command failed: $*" >&2; return 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

# table_row NAME VALUE...: one row, tab-separated, to stdout and the results file.
table_row() {
  local IFS=$'\t'
  echo "$*" | tee -a "$RESULTS_FILE"
}
