#!/usr/bin/env bash
# Every test depends on the //test_utils libraries it imports. //test_utils is one library per
# concern (so an edit re-runs only its dependents); a test that imports a module its target
# does not depend on finds it missing from its runfiles only when it runs. Here every py_test's
# own sources are read for `test_utils.<module>` imports, and Bazel is asked whether
# //test_utils:<module>.py is among the target's transitive dependencies. Last, no tool's
# library depends on //test_utils.
source "$(dirname "$0")/lib.sh"

report="$(python3 - "$BAZEL" <<'PY'
import re, subprocess, sys
bazel = sys.argv[1]
IMPORT = re.compile(r"^\s*(?:from test_utils(?:\.(\w+))? import ([\w, ()]+)|import test_utils\.(\w+))", re.M)
def query(expr):
    out = subprocess.run([bazel, "query", expr], capture_output=True, text=True, check=True)
    return out.stdout.split()
modules = {l.split(":")[1][:-3] for l in query("kind('source file', //test_utils:*)") if l.endswith(".py")}
missing = []
tests = query("kind(py_test, //...)")
for test in tests:
    package = test[2:].split(":")[0]
    srcs = [l for l in query(f"labels(srcs, {test})") if l.startswith(f"//{package}:")]
    wanted = set()
    for src in srcs:
        text = open(src[2:].replace(":", "/")).read()
        for sub, names, plain in IMPORT.findall(text):
            if sub or plain:
                wanted.add(sub or plain)
            else:  # from test_utils import a, b
                wanted |= {n for n in re.split(r"[\s,()]+", names) if n in modules}
    if not wanted:
        continue
    have = set(query(f"kind('source file', deps({test})) intersect //test_utils:*"))
    for module in sorted(wanted):
        if f"//test_utils:{module}.py" not in have:
            missing.append(f"{test} imports test_utils.{module} without depending on it")
print(f"{len(tests)} tests checked")
print("\n".join(missing))
sys.exit(1 if missing else 0)
PY
)" && pass "every test depends on the test_utils modules it imports (${report})" ||
  fail "missing test_utils deps: ${report}"

# The tools (runner, lease, hardware model, gate, results, the recorder) stand on no test
# library: editing a test helper must not change them or what they stage.
tools='//tools/runner:runner + //tools/hardware/... + //tools/gate:gate + //tools/results/... + //tools:update_test_times'
if leaks="$("$BAZEL" query "deps(${tools}) intersect //test_utils/..." 2>/dev/null)"; then
  [[ -z $leaks ]] && pass "no tool depends on //test_utils" ||
    fail "tools depend on the test library: $(tr '\n' ' ' <<<"$leaks")"
else
  fail "bazel query of the tools' dependencies failed"
fi
finish
