"""Every test depends on the //test_utils libraries it imports.

//test_utils is one library per concern (so an edit re-runs only its dependents); a test that
imports a module its target does not depend on finds it missing from its runfiles only when it
runs. Here every py_test's own sources are read for `test_utils.<module>` imports, and Bazel is
asked whether //test_utils:<module>.py is among the target's transitive dependencies. Last, no
tool's library depends on //test_utils. Edits nothing: the workspace's own Bazel.
"""

import re
import sys
from xml.etree import ElementTree

from tools.selftest.harness import ROOT, Checks, workspace_bazel

IMPORT = re.compile(
    r"^\s*(?:from test_utils(?:\.(\w+))? import ([\w, ()]+)|import test_utils\.(\w+))", re.M
)
# The runner, lease, hardware model, gate, results and the recorder stand on no test library:
# editing a test helper must not change them or what they stage.
TOOLS = (
    "//tools/runner:runner + //tools/hardware/... + //tools/gate:gate + //tools/results/... "
    "+ //tools:update_test_times"
)


def imported(text: str, modules: set[str]) -> set[str]:
    """The test_utils modules a source imports."""
    wanted = set()
    for sub, names, plain in IMPORT.findall(text):
        if sub or plain:
            wanted.add(sub or plain)
        else:  # from test_utils import a, b
            wanted |= {n for n in re.split(r"[\s,()]+", names) if n in modules}
    return wanted


def test_sources(rules: str) -> dict[str, list[str]]:
    """{py_test label: its srcs} from `bazel query --output=xml` of the tests."""
    sources = {}
    for rule in ElementTree.fromstring(rules).iter("rule"):
        srcs = rule.find("list[@name='srcs']")
        labels = [] if srcs is None else [label.get("value") for label in srcs.iter("label")]
        sources[rule.get("name")] = labels
    return sources


def missing_deps(query) -> tuple[int, list[str]]:
    """How many py_tests there are, and each test_utils import without its dependency.

    QUERY(*args) is `bazel query`'s output. A query per test_utils module (the tests that
    depend on it) and one for every test's srcs, not two per test.
    """
    sources = query("kind('source file', //test_utils:*)").split()
    modules = {label.split(":")[1][:-3] for label in sources if label.endswith(".py")}
    tests = test_sources(query("--output=xml", "kind(py_test, //...)"))
    dependents = {
        module: set(query(f"rdeps(kind(py_test, //...), //test_utils:{module}.py)").split())
        for module in sorted(modules)
    }
    missing = []
    for test, srcs in sorted(tests.items()):
        package = test[2:].split(":")[0]
        wanted = set()
        for src in srcs:
            if src.startswith(f"//{package}:"):
                wanted |= imported((ROOT / src[2:].replace(":", "/")).read_text(), modules)
        for module in sorted(wanted):
            if test not in dependents[module]:
                missing.append(f"{test} imports test_utils.{module} without depending on it")
    return len(tests), missing


def main() -> int:
    checks = Checks("check_deps")
    with workspace_bazel() as bazel:

        def query(*args: str) -> str:
            done = bazel.run("query", *args)
            if done.returncode != 0:
                raise RuntimeError(f"bazel query {args} failed:\n{done.stderr[-2000:]}")
            return done.stdout

        count, missing = missing_deps(query)
        checks.expect(
            not missing,
            f"every test depends on the test_utils modules it imports ({count} tests checked)",
            "missing test_utils deps: " + "; ".join(missing),
        )
        leaks = bazel.run("query", f"deps({TOOLS}) intersect //test_utils/...")
        if leaks.returncode != 0:
            checks.fail("bazel query of the tools' dependencies failed")
        else:
            checks.expect(
                not leaks.stdout.split(),
                "no tool depends on //test_utils",
                f"tools depend on the test library: {' '.join(leaks.stdout.split())}",
            )
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
