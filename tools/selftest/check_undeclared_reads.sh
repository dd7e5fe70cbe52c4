#!/usr/bin/env bash
# A test that reads a file of the source tree its target does not declare fails, naming the file
# (tools/runner/process/read_audit.py), in the test process and in its rank processes; declared, the same
# read passes and an edit of the file re-runs the test. Before the audit, the undeclared read
# PASSED and stayed (cached) PASSED after an edit of the file.
# Writes a throw-away package under tools/selftest/_scratch_reads (git-ignored).
source "$(dirname "$0")/lib.sh"
scratch=tools/selftest/_scratch_reads
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch"
events="$(mktemp -d /tmp/check_undeclared_reads.XXXXXX)/events.json"
echo expected >"$scratch/golden.txt"
cat >"$scratch/t.py" <<'PY'
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden.txt"  # the runfile resolved: the workspace


def test_matches_its_golden_file():
    assert GOLDEN.read_text() == "expected\n"
PY
cat >"$scratch/t_rank.py" <<'PY'
from pathlib import Path

from test_utils.distributed import run_ranks


def read_golden(path):
    try:
        return Path(path).read_text()
    except Exception as error:  # a rank that hides the refusal: the record still fails the target
        return repr(error)


def test_ranks_read_the_golden_file():
    golden = Path(__file__).resolve().parent / "golden.txt"
    assert run_ranks(read_golden, 2, backend="gloo", args=(str(golden),)) == ["expected\n"] * 2
PY
build() {
  cat >"$scratch/BUILD.bazel" <<BUILD
load("//tools/build_defs:torch_test.bzl", "torch_test")

torch_test(name = "t", size = "small", data = [$1])

torch_test(name = "t_rank", data = [$1], deps = ["//test_utils:distributed", "@pypi//:torch"])
BUILD
}
run() { "$BAZEL" test "$(test_events "$events")" "//$scratch:t" "//$scratch:t_rank" >"${events%.json}.log" 2>&1 || true; }

say "undeclared: each target fails, naming the file"
build ""
run
for target in t t_rank; do
  expect_result "$events" "//$scratch:$target" FAILED fresh "$target: an undeclared read FAILED"
  expect_line "$(cat "bazel-testlogs/$scratch/$target/test.log")" \
    "not among its inputs.*|^  $scratch/golden.txt\$" "$target's log names $scratch/golden.txt"
done
expect_line "$(cat "bazel-testlogs/$scratch/t_rank/test.log")" "torch_test: FAILED: the test opened files of the source tree" "t_rank: the runner fails it though the rank swallowed the refusal"

say "declared in data: passes; an edit of the file re-runs the test"
build '"golden.txt"'
run
expect_result "$events" "//$scratch:t" PASSED fresh "t: declared, PASSED"
expect_result "$events" "//$scratch:t_rank" PASSED fresh "t_rank: declared, PASSED"
echo changed >"$scratch/golden.txt"
run
expect_result "$events" "//$scratch:t" FAILED fresh "t: the edit re-ran it (FAILED: the golden differs)"
expect_result "$events" "//$scratch:t_rank" FAILED fresh "t_rank: the edit re-ran it"
rm -rf "$(dirname "$events")"
finish
