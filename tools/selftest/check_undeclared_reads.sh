#!/usr/bin/env bash
# A test that reads a file of the source tree its target does not declare fails, naming the file,
# in the test process, in its rank processes, in any other process it starts, in Python or in C:
# the runner's mount namespace holds only the target's declared inputs of the source tree
# (tools/runner/source_view.py), so the file is not there. Declared, the same read passes and an
# edit of the file re-runs the test. Before, the undeclared read PASSED and stayed (cached)
# PASSED after an edit of the file: first every read, then (under an audit hook on Python's
# open) reads in C (fopen, sqlite), a stat (Path.exists()) and a Python child with an empty
# environment; and, through /proc/<pid>/root of a process outside the runner's namespaces, the
# flag file beside the test. The same for an installed package: a test that imports one of
# @pypi's its target does not depend on finds it absent (pinned mode ships each package's folder
# as one runfile of the targets that depend on it), and passes once it depends on it.
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
        return f"{type(error).__name__}: {error}"


def test_ranks_read_the_golden_file():
    golden = Path(__file__).resolve().parent / "golden.txt"
    assert run_ranks(read_golden, 2, backend="gloo", args=(str(golden),)) == ["expected\n"] * 2
PY
cat >"$scratch/t_sub.py" <<'PY'
import subprocess
import sys
from pathlib import Path

# The child swallows the audit's refusal and exits 0: only the audit's record can fail the target.
CHILD = """
import pathlib, sys
try:
    print(pathlib.Path(sys.argv[1]).read_text(), end="")
except Exception as error:
    print(f"{type(error).__name__}: {error}")
"""


def test_a_python_subprocess_reads_the_golden_file():
    golden = Path(__file__).resolve().parent / "golden.txt"
    run = subprocess.run([sys.executable, "-c", CHILD, str(golden)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "expected\n" or run.stdout.startswith("UndeclaredInput"), run.stdout
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
            text = f"{type(error).__name__}: {error}"
        assert text == "expected\n" or text.startswith("UndeclaredInput"), text
PY
# golden_db VALUE: the database t_sqlite reads, holding VALUE.
golden_db() {
  python3 -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE IF NOT EXISTS t (v TEXT)")
db.execute("DELETE FROM t")
db.execute("INSERT INTO t VALUES (?)", (sys.argv[2],))
db.commit()' "$scratch/golden.db" "$1"
}
golden_db expected
echo flag >"$scratch/flag.txt"
cat >"$scratch/t_fopen.py" <<'PY'
import ctypes
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden.txt"


def test_c_reads_the_golden_file():
    # As torch.from_file or torch.jit.load do: C's stdio, which Python's audit hooks never see.
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    handle = libc.fopen(str(GOLDEN).encode(), b"r")
    assert handle, f"fopen({GOLDEN}) found no file"
    buffer = ctypes.create_string_buffer(64)
    libc.fgets(buffer, 64, ctypes.c_void_p(handle))
    libc.fclose(ctypes.c_void_p(handle))
    assert buffer.value == b"expected\n"
PY
cat >"$scratch/t_sqlite.py" <<'PY'
import sqlite3
from pathlib import Path

DB = Path(__file__).resolve().parent / "golden.db"


def test_sqlite_reads_the_golden_database():
    with sqlite3.connect(f"file:{DB}?mode=ro", uri=True) as db:
        assert db.execute("SELECT v FROM t").fetchall() == [("expected",)]
PY
cat >"$scratch/t_exists.py" <<'PY'
from pathlib import Path

FLAG = Path(__file__).resolve().parent / "flag.txt"  # beside the test, never declared


def test_an_undeclared_flag_file_is_absent():
    # The file is there in the source tree; the test must not see it, so that creating,
    # editing or deleting it cannot change (or stale) a cached result.
    assert not FLAG.exists()
PY
cat >"$scratch/t_proc.py" <<'PY'
import os
from pathlib import Path

FLAG = Path(__file__).resolve().parent / "flag.txt"  # beside the test, never declared


def test_no_process_root_shows_the_undeclared_flag_file():
    # A forger's way past the view: /proc/<pid>/root of a process outside the runner's mount
    # namespace (the sandbox's, Bazel's) is the real root. The test's processes have a pid
    # namespace and /proc of their own (tools/runner/private_pids.py): there is none to see.
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    shown = [p for p in pids if os.path.exists(f"/proc/{p}/root{FLAG}")]
    assert not shown, f"{FLAG} shows through /proc/<pid>/root of pids {shown}"
PY
cat >"$scratch/t_pkg.py" <<'PY'
def test_imports_a_package_of_the_lock():
    import numpy

    assert numpy.arange(3).sum() == 3
PY
cat >"$scratch/t_env.py" <<'PY'
import subprocess
import sys
from pathlib import Path


def test_a_python_child_with_an_empty_environment_reads_the_golden_file():
    # env={}: no PYTHONPATH, so no sitecustomize and no audit hook in the child.
    golden = Path(__file__).resolve().parent / "golden.txt"
    child = f"print(open({str(golden)!r}).read(), end='')"
    run = subprocess.run([sys.executable, "-c", child], env={}, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "expected\n"
PY
build() {
  cat >"$scratch/BUILD.bazel" <<BUILD
load("//tools/build_defs:torch_test.bzl", "torch_test")

torch_test(name = "t", size = "small", data = [$1])

torch_test(name = "t_rank", data = [$1], deps = ["//test_utils:distributed", "@pypi//:torch"])

torch_test(name = "t_sub", size = "small", data = [$1])

torch_test(name = "t_mptc", data = [$1], deps = ["//test_utils:torch_testing"])

torch_test(name = "t_fopen", size = "small", data = [$1])

torch_test(name = "t_sqlite", size = "small", data = [$2])

torch_test(name = "t_env", size = "small", data = [$1])

torch_test(name = "t_exists", size = "small")

torch_test(name = "t_proc", size = "small")

torch_test(name = "t_pkg", size = "small", deps = [$3])
BUILD
}
audited=(t t_rank t_sub t_mptc)
unseen=(t_fopen t_sqlite t_env)
# run [BAZEL OPTIONS...]: every target of the package, once.
run() { "$BAZEL" test "$(test_events "$events")" "$@" "//$scratch:all" >"${events%.json}.log" 2>&1 || true; }

# The file is named by the audit's record ("not among its inputs") where the open reached it, or
# by the open's own error where the source view left it out (no such file).
named="not among its inputs.*|^  $scratch/golden.txt\$|No such file or directory: .*$scratch/golden.txt"
refused="torch_test: FAILED: the test opened files of the source tree|No such file or directory: .*$scratch/golden.txt"
say "undeclared: each target fails, naming the file"
build "" "" '"@pypi//:tqdm"'
run
for target in "${audited[@]}"; do
  expect_result "$events" "//$scratch:$target" FAILED fresh "$target: an undeclared read FAILED"
  expect_line "$(cat "bazel-testlogs/$scratch/$target/test.log")" "$named" "$target's log names $scratch/golden.txt"
done
expect_line "$(cat "bazel-testlogs/$scratch/t_rank/test.log")" "$refused" "t_rank: the runner fails it though the rank swallowed the refusal"
expect_line "$(cat "bazel-testlogs/$scratch/t_sub/test.log")" "$refused" "t_sub: the runner fails it though the subprocess swallowed the refusal"
expect_line "$(cat "bazel-testlogs/$scratch/t_mptc/test.log")" "$refused" "t_mptc: the runner fails it though torch's ranks swallowed the refusal"

say "undeclared, unseen by the audit (C, sqlite, stat, a child with an empty environment): absent"
for target in "${unseen[@]}"; do
  expect_result "$events" "//$scratch:$target" FAILED fresh "$target: an undeclared read FAILED"
done
expect_line "$(cat "bazel-testlogs/$scratch/t_fopen/test.log")" "fopen\(.*golden.txt\) found no file" "t_fopen: the file is absent to C"
expect_line "$(cat "bazel-testlogs/$scratch/t_sqlite/test.log")" "unable to open database file" "t_sqlite: the database is absent to sqlite"
expect_line "$(cat "bazel-testlogs/$scratch/t_env/test.log")" "No such file or directory: .*golden.txt" "t_env: the file is absent to a child with an empty environment"
expect_result "$events" "//$scratch:t_pkg" FAILED fresh "t_pkg: importing a package it does not depend on FAILED"
expect_line "$(cat "bazel-testlogs/$scratch/t_pkg/test.log")" "No module named 'numpy'" "t_pkg: numpy is absent to it"
# Its inputs are the same at every run of this check: cached from an earlier one, or fresh.
expect_result "$events" "//$scratch:t_exists" PASSED any "t_exists: the undeclared flag file is absent"
expect_result "$events" "//$scratch:t_proc" PASSED any "t_proc: nor does it show through /proc/<pid>/root"
rm "$scratch/flag.txt"
run
expect_result "$events" "//$scratch:t_exists" PASSED cached "t_exists: deleting the flag file keeps (cached) PASSED"
run --nocache_test_results
expect_result "$events" "//$scratch:t_exists" PASSED fresh "t_exists: ... and run again it still PASSED: the cached result was not stale"
echo edited >"$scratch/flag.txt"
run --nocache_test_results
expect_result "$events" "//$scratch:t_exists" PASSED fresh "t_exists: creating it with other bytes changes nothing either"

say "declared in data: passes; an edit of the file re-runs the test"
build '"golden.txt"' '"golden.db"' '"@pypi//:numpy"'
run
expect_result "$events" "//$scratch:t" PASSED fresh "t: declared, PASSED"
expect_result "$events" "//$scratch:t_rank" PASSED fresh "t_rank: declared, PASSED"
expect_result "$events" "//$scratch:t_sub" PASSED fresh "t_sub: declared, PASSED"
expect_result "$events" "//$scratch:t_mptc" PASSED fresh "t_mptc: declared, PASSED"
for target in "${unseen[@]}"; do
  expect_result "$events" "//$scratch:$target" PASSED fresh "$target: declared, PASSED"
done
expect_result "$events" "//$scratch:t_pkg" PASSED any "t_pkg: depending on numpy, PASSED"
echo changed >"$scratch/golden.txt"
golden_db changed
run
expect_result "$events" "//$scratch:t" FAILED fresh "t: the edit re-ran it (FAILED: the golden differs)"
expect_result "$events" "//$scratch:t_rank" FAILED fresh "t_rank: the edit re-ran it"
expect_result "$events" "//$scratch:t_sub" FAILED fresh "t_sub: the edit re-ran it"
expect_result "$events" "//$scratch:t_mptc" FAILED fresh "t_mptc: the edit re-ran it"
for target in "${unseen[@]}"; do
  expect_result "$events" "//$scratch:$target" FAILED fresh "$target: the edit re-ran it"
done
rm -rf "$(dirname "$events")"
finish
