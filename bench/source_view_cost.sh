#!/usr/bin/env bash
# What the source view (tools/runner/source_view.py) costs each target, measured inside
# `bazel test` (linux-sandbox) by a generated target that runs it on its own runfiles tree:
#   prepare      computing the view: walking the runfiles tree, resolving its links into the
#                source tree (in the runner process, once per target)
#   enter        making it: unshare and one bind mount per declared file, in a forked child;
#                a fork that enters nothing is measured beside it and subtracted
#   import torch a child `python -c "import torch"` started plain vs inside a view of its own
#                (preexec_fn): whether work in the namespace is slower
# RUNS times each, interleaved, for a target with torch's runfiles (@pypi//:torch)
# and one with the runner's alone; wall and CPU seconds (CPU: the process's own or its
# children's rusage). Writes RESULTS_DIR/source_view_cost.tsv (one row per run) and prints the
# medians. The generated package is bench/_source_view/ (git-ignored, removed on exit).
# Usage: bench/source_view_cost.sh [RUNS]   (default 10)
source "$(dirname "$0")/lib.sh"
runs="${1:-10}"
package=bench/_source_view
RESULTS_FILE="${RESULTS_DIR}/source_view_cost.tsv"
trap 'rm -rf "$package"' EXIT
rm -rf "$package"
mkdir -p "$package"
cat >"$package/measure.py" <<'PY'
import os
import resource
import subprocess
import sys
import time

from tools.runner import source_view

RUNS = int(os.environ["SOURCE_VIEW_RUNS"])
TARGET = os.environ["TEST_TARGET"].rsplit(":", 1)[-1]


def _cpu(who) -> float:
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime


def _timed(who, work):
    wall, cpu = time.perf_counter(), _cpu(who)
    result = work()
    return result, time.perf_counter() - wall, _cpu(who) - cpu


def _fork(body) -> None:
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def test_measure():
    rows = []
    for run in range(1, RUNS + 1):
        view, wall, cpu = _timed(resource.RUSAGE_SELF, source_view.prepare)
        assert view is not None, "no source tree behind the runfiles: nothing to measure"
        rows.append(("prepare", run, wall, cpu, len(view.files)))
        _, base_wall, base_cpu = _timed(resource.RUSAGE_CHILDREN, lambda: _fork(lambda: None))
        _, wall, cpu = _timed(resource.RUSAGE_CHILDREN, lambda: _fork(view.enter))
        rows.append(("enter", run, wall - base_wall, cpu - base_cpu, len(view.files)))
        if TARGET == "torch":
            for how, preexec in (("plain", None), ("in view", view.preexec)):
                argv = [sys.executable, "-c", "import torch"]
                _, wall, cpu = _timed(
                    resource.RUSAGE_CHILDREN,
                    lambda: subprocess.run(argv, preexec_fn=preexec, check=True),
                )
                rows.append((f"import torch, {how}", run, wall, cpu, len(view.files)))
    out = os.path.join(os.environ["TEST_UNDECLARED_OUTPUTS_DIR"], "costs.tsv")
    with open(out, "w") as f:
        for what, run, wall, cpu, files in rows:
            f.write(f"{TARGET}\t{what}\t{run}\t{wall:.4f}\t{cpu:.4f}\t{files}\n")
PY
cat >"$package/BUILD.bazel" <<BUILD
load("//tools/build_defs:torch_test.bzl", "torch_test")

torch_test(
    name = "torch",
    src = "measure.py",
    env = {"SOURCE_VIEW_RUNS": "$runs"},
    tags = ["manual"],
    deps = ["@pypi//:torch"],
)

torch_test(
    name = "runner_only",
    src = "measure.py",
    env = {"SOURCE_VIEW_RUNS": "$runs"},
    tags = ["manual"],
)
BUILD
"$BAZEL" test --nocache_test_results --test_output=errors "//$package:torch" \
  "//$package:runner_only" >"${RESULTS_DIR}/source_view_cost.log" 2>&1 ||
  { tail -n 30 "${RESULTS_DIR}/source_view_cost.log" >&2; exit 1; }
printf 'target\twhat\trun\twall_s\tcpu_s\tdeclared_files\n' >"$RESULTS_FILE"
for target in torch runner_only; do
  python3 -c 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read("costs.tsv").decode())' \
    "bazel-testlogs/$package/$target/test.outputs/outputs.zip" >>"$RESULTS_FILE"
done
python3 - "$RESULTS_FILE" <<'PY'
import collections, csv, statistics, sys

rows = collections.defaultdict(list)
with open(sys.argv[1]) as f:
    for row in csv.DictReader(f, delimiter="\t"):
        rows[row["target"], row["what"], row["declared_files"]].append(row)
print("| target | declared files | what | wall ms (median) | CPU ms (median) | runs |")
print("| --- | ---: | --- | ---: | ---: | ---: |")
for (target, what, files), found in rows.items():
    wall = statistics.median(float(r["wall_s"]) for r in found) * 1000
    cpu = statistics.median(float(r["cpu_s"]) for r in found) * 1000
    print(f"| {target} | {files} | {what} | {wall:.1f} | {cpu:.1f} | {len(found)} |")
PY
