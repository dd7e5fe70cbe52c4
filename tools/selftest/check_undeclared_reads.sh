#!/usr/bin/env bash
# A test that reads a file of the source tree its target does not declare fails, naming the file
# (tools/runner/process/read_audit.py), in the test process, in its rank processes and in any
# other Python process it starts (tools/runner/process/descendants.py); declared, the same read
# passes and an edit of the file re-runs the test. Before the audit, the undeclared read PASSED
# and stayed (cached) PASSED after an edit of the file; before descendants.py, a read in a
# `subprocess.run([sys.executable, ...])` of the test, or in a rank of torch's
# MultiProcessTestCase, still did.
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
cat >"$scratch/t_sub.py" <<'PY'
import subprocess
import sys
from pathlib import Path

# The child swallows the refusal and exits 0: only the audit's record can fail the target.
CHILD = """
import pathlib, sys
try:
    print(pathlib.Path(sys.argv[1]).read_text(), end="")
except Exception as error:
    print(type(error).__name__)
"""


def test_a_python_subprocess_reads_the_golden_file():
    golden = Path(__file__).resolve().parent / "golden.txt"
    run = subprocess.run([sys.executable, "-c", CHILD, str(golden)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout in ("expected\n", "UndeclaredInput\n"), run.stdout
PY
cat >"$scratch/t_mptc.py" <<'PY'
from pathlib import Path

from torch.testing._internal.common_distributed import MultiProcessTestCase

GOLDEN = Path(__file__).resolve().parent / "golden.txt"


class TwoRanks(MultiProcessTestCase):
    """torch's own launcher: each rank a spawned interpreter that runs the test method."""

    world_size = 2

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def test_ranks_read_the_golden_file(self):
        try:
            text = GOLDEN.read_text()
        except Exception as error:  # the rank hides the refusal: only the record can tell
            text = type(error).__name__ + "\n"
        assert text in ("expected\n", "UndeclaredInput\n"), text
PY
build() {
  cat >"$scratch/BUILD.bazel" <<BUILD
load("//tools/build_defs:torch_test.bzl", "torch_test")

torch_test(name = "t", size = "small", data = [$1])

torch_test(name = "t_rank", data = [$1], deps = ["//test_utils:distributed", "@pypi//:torch"])

torch_test(name = "t_sub", size = "small", data = [$1])

torch_test(name = "t_mptc", data = [$1], deps = ["//test_utils:torch_testing"])
BUILD
}
run() { "$BAZEL" test "$(test_events "$events")" "//$scratch:t" "//$scratch:t_rank" "//$scratch:t_sub" "//$scratch:t_mptc" >"${events%.json}.log" 2>&1 || true; }

say "undeclared: each target fails, naming the file"
build ""
run
for target in t t_rank t_sub t_mptc; do
  expect_result "$events" "//$scratch:$target" FAILED fresh "$target: an undeclared read FAILED"
  expect_line "$(cat "bazel-testlogs/$scratch/$target/test.log")" \
    "not among its inputs.*|^  $scratch/golden.txt\$" "$target's log names $scratch/golden.txt"
done
expect_line "$(cat "bazel-testlogs/$scratch/t_rank/test.log")" "torch_test: FAILED: the test opened files of the source tree" "t_rank: the runner fails it though the rank swallowed the refusal"
expect_line "$(cat "bazel-testlogs/$scratch/t_sub/test.log")" "torch_test: FAILED: the test opened files of the source tree" "t_sub: the runner fails it though the subprocess swallowed the refusal"
expect_line "$(cat "bazel-testlogs/$scratch/t_mptc/test.log")" "torch_test: FAILED: the test opened files of the source tree" "t_mptc: the runner fails it though torch's ranks swallowed the refusal"

say "declared in data: passes; an edit of the file re-runs the test"
build '"golden.txt"'
run
expect_result "$events" "//$scratch:t" PASSED fresh "t: declared, PASSED"
expect_result "$events" "//$scratch:t_rank" PASSED fresh "t_rank: declared, PASSED"
expect_result "$events" "//$scratch:t_sub" PASSED fresh "t_sub: declared, PASSED"
expect_result "$events" "//$scratch:t_mptc" PASSED fresh "t_mptc: declared, PASSED"
echo changed >"$scratch/golden.txt"
run
expect_result "$events" "//$scratch:t" FAILED fresh "t: the edit re-ran it (FAILED: the golden differs)"
expect_result "$events" "//$scratch:t_rank" FAILED fresh "t_rank: the edit re-ran it"
expect_result "$events" "//$scratch:t_sub" FAILED fresh "t_sub: the edit re-ran it"
expect_result "$events" "//$scratch:t_mptc" FAILED fresh "t_mptc: the edit re-ran it"
rm -rf "$(dirname "$events")"
finish
