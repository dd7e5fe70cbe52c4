#!/usr/bin/env bash
# Cold-upload failure rate of --config=remote against the loopback rig, before and after the fix
# (README.md, "Cold uploads"). Each run starts a fresh rig (empty CAS and action cache) and runs
# three tests that share torch's ~22k input files, so all their inputs are uploaded at once.
#   before  gRPC's default pending-call queue in BuildGrid, Bazel's default 100 connections
#   after   this repository's settings (buildgrid_config.py, .bazelrc --config=remote)
#
# Usage: tools/remote/bench_cold_uploads.sh before|after [RUNS=10]
# Environment: BENCH_DIR (output base, rig and logs; default /tmp/torch_tests_bench_uploads),
#              RIG_PORT (default 8990, so a rig on 8980 is left alone).
# Prints one line per run and a summary; per-run Bazel logs stay in $BENCH_DIR/logs.
set -euo pipefail
readonly root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
source tools/remote/rig_lib.sh
readonly mode="${1:?usage: $0 before|after [RUNS]}"
readonly runs="${2:-10}"
readonly dir="${BENCH_DIR:-/tmp/torch_tests_bench_uploads}"
export RIG_PORT="${RIG_PORT:-8990}" RIG_DIR="${dir}/rig"
readonly targets=(
  //tools/selftest:probe_test_utils
  //tools/runner/tests:test_units
  //test_utils/tests:test_markers_and_versions
)
# No bazel-* links: the workspace's keep pointing at its own output base.
flags=(--symlink_prefix=/ --config=remote "--remote_executor=grpc://127.0.0.1:${RIG_PORT}" --nocache_test_results)
case "$mode" in
  before) export RIG_GRPC_DEFAULT_QUEUE=1; flags+=(--remote_max_connections=100) ;;
  after) ;;
  *) echo "usage: $0 before|after [RUNS]" >&2; exit 2 ;;
esac
mkdir -p "${dir}/logs"
bazel_() { tools/bazel --output_base="${dir}/output_base" "$@"; }
trap 'tools/remote/rig.sh down >/dev/null 2>&1 || true; bazel_ shutdown >/dev/null 2>&1 || true' EXIT

upload_failures=0 test_failures=0 passes=0
for i in $(seq "$runs"); do
  tools/remote/rig.sh down >/dev/null 2>&1 || true
  tools/remote/rig.sh up >/dev/null
  log="${dir}/logs/${mode}-${i}.log"
  start=$SECONDS
  rc=0
  # Each rig has its own credentials (rig.sh up writes them).
  bazel_ test "${flags[@]}" "$(rig_auth_header dev)" \
    "${targets[@]}" >"$log" 2>&1 || rc=$?
  if grep -q "errors during bulk transfer" "$log"; then
    verdict="upload-failure ($(grep -o '[0-9]* errors during bulk transfer' "$log" | head -1))"
    upload_failures=$((upload_failures + 1))
  elif ((rc == 0)); then
    verdict=passed
    passes=$((passes + 1))
  else
    verdict="other failure (exit ${rc})"
    test_failures=$((test_failures + 1))
  fi
  echo "${mode} run ${i}: ${verdict} in $((SECONDS - start)) s"
done
echo "${mode}: ${upload_failures}/${runs} cold runs failed uploading," \
  "${test_failures} failed otherwise, ${passes} passed"
