#!/usr/bin/env bash
# Ports/rendezvous stress and flake hunt: every distributed CPU target many times at once.
#
#   bench/stress.sh short   CI: RUNS=2 runs of each distributed CPU target at once
#   bench/stress.sh long    RUNS=20 (as --config=stress), then the flake hunt: the whole CPU
#                           suite FLAKE_RUNS=5 times, reporting flaky targets
#
# Distributed CPU targets: //distributed_tests:test_embedding_ops, the cpu shards of
# //distributed_tests:test_dynamo_distributed without its BERT test (--test_filter='not bert';
# ~50 s and ~7 GB per run), //test_utils/tests:test_distributed_harness. They run with
# --config=stress (.bazelrc: --nocache_test_results) and --local_test_jobs above the core count.
#
# Per phase, from Bazel's build event file (bench/stress_report.py): per target the test
# actions, failed runs, timeouts, "address already in use" lines in the test logs, lines saying
# processes outlived a test, wall times; the peak of test actions running at once (sampled
# from Bazel's progress lines); flaky targets; and orphans: processes with a test environment
# of this output base still alive once Bazel returned. Exit status 1 if any run failed or any
# orphan was found.
#
# Environment:
#   RUNS           runs per distributed target (default 2 short, 20 long)
#   JOBS           concurrent test actions, --local_test_jobs and --jobs (default 4 x cores)
#   FLAKE_RUNS     runs per CPU-suite target in the flake hunt (default 5)
#   FLAKE_JOBS     concurrent test actions there (default: Bazel's, by CPU cores; the BERT
#                  test peaks at ~7 GB, so mind memory when raising it)
#   BAZEL          Bazel command (default tools/bazel)
#   BAZEL_STARTUP  startup options, e.g. "--output_base=/tmp/stress_ob" to leave a shared
#                  server free (split on spaces)
#   BAZEL_FLAGS    extra flags for every `bazel test` (split on spaces)
#   RESULTS_DIR    logs, build event files and tables (default bench/results)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

mode="${1:-short}"
case "$mode" in
  short) runs="${RUNS:-2}" ;;
  long) runs="${RUNS:-20}" ;;
  *) echo "usage: $0 [short|long]" >&2; exit 2 ;;
esac
cores="$(nproc)"
jobs="${JOBS:-$((4 * cores))}"
read -ra startup <<<"${BAZEL_STARTUP:-}"
read -ra extra <<<"${BAZEL_FLAGS:-}"
distributed_targets=(
  //distributed_tests:test_embedding_ops
  //distributed_tests:test_dynamo_distributed
  //test_utils/tests:test_distributed_harness
)
RESULTS_FILE="${RESULTS_DIR}/stress_summary.tsv"
: >"$RESULTS_FILE"
failed=0

bazel() { "$BAZEL" ${startup[@]+"${startup[@]}"} "$@"; }

# Test processes of this output base's sandboxes that outlived `bazel test` (Bazel names the
# sandbox folder after a sha256 of the output base; test processes carry TEST_TARGET).
count_orphans() {
  local output_base sandbox count=0 environ
  output_base="$(bazel info output_base 2>/dev/null)"
  sandbox="bazel-sandbox.$(printf %s "$output_base" | sha256sum | cut -c1-64)"
  for environ in /proc/[0-9]*/environ; do
    if grep -qasF "TEST_TARGET=" "$environ" && grep -qasE "${sandbox}|${output_base}/" "$environ"; then
      count=$((count + 1))
    fi
  done
  echo "$count"
}

# phase NAME BAZEL_TEST_ARGS...: one `bazel test`, its table, its orphans.
phase() {
  local name="$1" start=$SECONDS status=0 orphans running
  shift
  local bep="${RESULTS_DIR}/stress_${name}.bep.json" log="${RESULTS_DIR}/stress_${name}.log"
  echo "== ${name}: bazel test $*"
  bazel test --config=stress --build_event_json_file="$bep" \
    ${extra[@]+"${extra[@]}"} "$@" >"$log" 2>&1 || status=$?
  local wall=$((SECONDS - start))
  echo "bazel exit ${status} after ${wall} s (log: ${log})"
  python3 bench/stress_report.py "$bep" "${RESULTS_DIR}/stress_${name}.tsv" || failed=1
  running="$(grep -oE '[0-9]+ (actions )?running\)' "$log" | grep -oE '^[0-9]+' | sort -n | tail -1 || true)"
  echo "peak test actions running (Bazel's progress lines): ${running:-?}"
  orphans="$(count_orphans)"
  echo "orphans (test processes alive after Bazel returned): ${orphans}"
  ((orphans == 0)) || failed=1
  ((status == 0)) || failed=1
  summary+=("$(printf '%s\t%s\t%s\t%s\t%s\t%s' "$name" "$wall" "$status" "${running:-?}" "$orphans" "$*")")
}

summary=()
phase "distributed_${runs}x" --runs_per_test="$runs" --local_test_jobs="$jobs" --jobs="$jobs" \
  --test_filter='not bert' "${distributed_targets[@]}"

if [[ $mode == long ]]; then
  flake_jobs="${FLAKE_JOBS:-0}" # 0: Bazel schedules tests by the host's cores
  phase "cpu_suite_${FLAKE_RUNS:-5}x" --runs_per_test="${FLAKE_RUNS:-5}" \
    --runs_per_test_detects_flakes --local_test_jobs="$flake_jobs" --test_tag_filters=-gpu //...
fi

echo
echo "== summary (${cores} cores, ${jobs} concurrent distributed test actions)"
table_row phase wall_s bazel_exit peak_running orphans args >/dev/null
for row in "${summary[@]}"; do echo "$row" >>"$RESULTS_FILE"; done
column -t -s $'\t' "$RESULTS_FILE"
exit "$failed"
