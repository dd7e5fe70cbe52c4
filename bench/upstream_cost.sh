#!/usr/bin/env bash
# What a torch_test costs an upstream-style file over plain pytest of the same file: wall of
#   pytest     python -m pytest FILE (the repository's conftest loads the variant plugin)
#   bazel      tools/bazel test TARGET, uncached (--nocache_test_results), server already up
# one fresh run each per round, on the cpu variant. Writes RESULTS_DIR/upstream_cost.tsv.
# Usage: bench/upstream_cost.sh [NAME] [ROUNDS]
#   NAME: a fixture of //upstream_style_tests (default test_upstream_device_type), ROUNDS 3.
# Interpreter: $TORCH_TEST_PYTHON (host-interpreter mode for both), else the lock's @pypi
# for Bazel and python3 for pytest (which then needs torch and expecttest installed).
source "$(dirname "$0")/lib.sh"
name="${1:-test_upstream_device_type}"
rounds="${2:-3}"
python="${TORCH_TEST_PYTHON:-$(command -v python3)}"
RESULTS_FILE="${RESULTS_DIR}/upstream_cost.tsv"
: >"$RESULTS_FILE"
target="//upstream_style_tests:${name}"
"$BAZEL" build "$target" >/dev/null 2>&1 # fetch and runfiles outside the rows
table_row round pytest_s bazel_s
for round in $(seq "$rounds"); do
  plain=$(wall_seconds "$python" -m pytest -q -p no:cacheprovider "upstream_style_tests/${name}.py")
  bazel=$(wall_seconds "$BAZEL" test --nocache_test_results "$target")
  table_row "$round" "$plain" "$bazel"
done
