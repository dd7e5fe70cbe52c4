#!/usr/bin/env bash
# What a torch_test costs an upstream-style file over plain pytest of the same file: wall of
#   pytest     python -m pytest FILE (the repository's conftest loads the variant plugin)
#   bazel      tools/bazel test TARGET, uncached (--nocache_test_results), server already up
# one fresh run each per round, on the cpu variant. Writes RESULTS_DIR/upstream_cost.tsv.
# Kernel caches stay as they are between rounds (each side its own, warm after round 1), as
# between a user's runs: a file that compiles with inductor shows whether its kernels are reused.
# Usage: bench/upstream_cost.sh [NAME | PACKAGE:NAME] [ROUNDS] [FILTER]
#   NAME: a fixture of //upstream_style_tests (default test_upstream_device_type), or any
#   torch_test of PACKAGE whose source is PACKAGE/NAME.py (e.g. distributed_tests:
#   test_dynamo_distributed, which compiles with inductor); ROUNDS 3; FILTER a pytest -k
#   expression, passed to Bazel as --test_filter (e.g. test_call_method_forward).
# BAZEL_TEST_FLAGS: more flags for the Bazel side (e.g. --test_sharding_strategy=disabled, to
# see what a filtered run's empty shards cost).
# Interpreter: $TORCH_TEST_PYTHON (host-interpreter mode for both), else the lock's @pypi
# for Bazel and python3 for pytest (which then needs torch and expecttest installed).
source "$(dirname "$0")/lib.sh"
spec="${1:-test_upstream_device_type}"
rounds="${2:-3}"
filter="${3:-}"
[[ $spec == *:* ]] || spec="upstream_style_tests:${spec}"
package="${spec%%:*}"
name="${spec#*:}"
python="${TORCH_TEST_PYTHON:-$(command -v python3)}"
# Unset: the lock's @pypi, whatever this checkout's `tools/bazel setup` says.
export TORCH_TEST_PYTHON="${TORCH_TEST_PYTHON:-pinned}"
RESULTS_FILE="${RESULTS_DIR}/upstream_cost.tsv"
: >"$RESULTS_FILE"
target="//${package}:${name}"
pytest_filter=()
bazel_filter=()
if [[ -n $filter ]]; then
  pytest_filter=(-k "$filter")
  bazel_filter=("--test_filter=${filter}")
fi
"$BAZEL" build "$target" >/dev/null 2>&1 # fetch and runfiles outside the rows
table_row round pytest_s bazel_s
for round in $(seq "$rounds"); do
  plain=$(wall_seconds "$python" -m pytest -q -p no:cacheprovider "${pytest_filter[@]}" "${package}/${name}.py")
  # shellcheck disable=SC2086 # BAZEL_TEST_FLAGS: words
  bazel=$(wall_seconds "$BAZEL" test --nocache_test_results "${bazel_filter[@]}" ${BAZEL_TEST_FLAGS:-} "$target")
  table_row "$round" "$plain" "$bazel"
done
