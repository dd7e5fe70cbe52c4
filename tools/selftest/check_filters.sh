#!/usr/bin/env bash
# Filters as users write them, on a throw-away package (tools/selftest/_scratch_filters,
# git-ignored) whose name no BUILD file lists:
#   - torch_test(args = ["-k", "not test_b"]) reaches pytest as written (Bazel splits each
#     string of args on spaces; the macro quotes them);
#   - `tools/bazel run` of a sharded target works, with pytest arguments after `--`;
#   - --config=cpu over //... selects the new package's cpu target (no root list to edit).
source "$(dirname "$0")/lib.sh"
scratch=tools/selftest/_scratch_filters
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch"
printf 'def test_a():\n    pass\n\n\ndef test_b():\n    pass\n\n\ndef test_c():\n    pass\n' >"$scratch/t.py"
cat >"$scratch/BUILD.bazel" <<'BUILD'
load("//tools/build_defs:torch_test.bzl", "torch_test")

torch_test(
    name = "t",
    size = "small",
    args = ["-k", "not test_b"],
    shard_count = 2,
    tags = ["manual"],
)
BUILD

say "args with spaces reach pytest as written; run of a sharded target"
out="$("$BAZEL" run "//$scratch:t" -- -v 2>&1)" || true
expect_line "$out" " 2 passed, 1 deselected in " "test_a and test_c ran in one process"
expect_no_line "$out" "::test_b" "'not test_b' deselected test_b"
expect_no_line "$out" "only works with tests with one shard" "run accepted the sharded target"

say "a new package's targets are in the cpu config"
sed -i 's/    tags = \["manual"\],//' "$scratch/BUILD.bazel"
filter="$(grep -E '^test:cpu --test_tag_filters=' .bazelrc | cut -d= -f2)"
selected="$("$BAZEL" query "tests(//...) except attr(tags, '\\b${filter#-}\\b', tests(//...))" 2>&1)" || true
expect_line "$selected" "^//$scratch:t\$" "--config=cpu (${filter}) selects //$scratch:t"
finish
