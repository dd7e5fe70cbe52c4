"""Bazel sharding through the runner.

//tools/selftest:probe_shards (seven tests, shard_count 3) must run as three shards whose
test.xml files list every test exactly once, each shard some; //tools/selftest:probe_set_shards
(parameters pytest names by position over a set, one of them failing; shard_count 2) fails in
every shard, each naming the unstable collection. Edits nothing: the workspace's own Bazel.
"""

import sys

from tools.results import junit
from tools.selftest.harness import Checks, workspace_bazel

SHARDS = "//tools/selftest:probe_shards"
SET_SHARDS = "//tools/selftest:probe_set_shards"


def main() -> int:
    checks = Checks("check_shards")
    with workspace_bazel() as bazel:
        run = bazel.test("--nocache_test_results", SHARDS)
        run.expect(checks, SHARDS, "PASSED", "fresh", "the sharded target passed")
        run.expect_shards(checks, SHARDS, 3, "PASSED", "Bazel ran three shards")
        # This invocation's shards, from its build event file (tools/results).
        target = run.targets.get(SHARDS)
        cases = [[c.name for c in junit.cases(x)] for x in target.xml_files()] if target else []
        every = sorted(name for shard in cases for name in shard)
        report = f"shards: {[len(c) for c in cases]} cases: {every}"
        checks.expect(
            len(cases) == 3 and all(cases) and every == [f"test_{n}" for n in "abcdefg"],
            f"every test in exactly one shard, no shard empty ({report})",
            "shards do not partition the seven tests",
        )

        checks.say("positional ids over a set: every shard fails, naming the difference")
        run = bazel.test("--nocache_test_results", SET_SHARDS)
        run.expect_shards(checks, SET_SHARDS, 2, "FAILED", "both shards failed")
        target = run.targets.get(SET_SHARDS)
        logs = [p.read_text() for p in target.log_files()] if target else []
        named = [
            "collection differs between two processes" in log and "test_activation[case" in log
            for log in logs
        ]
        checks.expect(
            len(named) == 2 and all(named),
            f"shard logs naming the difference: {named}",
            "a shard did not name the unstable collection",
        )
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
