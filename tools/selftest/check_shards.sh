#!/usr/bin/env bash
# Bazel sharding through the runner: //tools/selftest:probe_shards (seven tests, shard_count 3)
# must run as three shards whose test.xml files list every test exactly once, each shard some;
# //tools/selftest:probe_set_shards (parameters pytest names by position over a set, one of
# them failing; shard_count 2) fails in every shard, each naming the unstable collection.
source "$(dirname "$0")/lib.sh"

events="$(mktemp)"
trap 'rm -f "$events"' EXIT
"$BAZEL" test --nocache_test_results "$(test_events "$events")" //tools/selftest:probe_shards \
  >/dev/null 2>&1 || true
expect_result "$events" //tools/selftest:probe_shards PASSED fresh "the sharded target passed"
expect_shards "$events" //tools/selftest:probe_shards 3 PASSED "Bazel ran three shards"

# This invocation's shards, from its build event file (tools/results).
if report="$(python3 - "$events" <<'PY'
import sys
from tools.results import bep, junit
target = bep.read(sys.argv[1])["//tools/selftest:probe_shards"]
cases = [[c.name for c in junit.cases(x)] for x in target.xml_files()]
every = [name for shard in cases for name in shard]
print("shards:", [len(c) for c in cases], "cases:", sorted(every))
ok = len(cases) == 3 and all(cases) and sorted(every) == [f"test_{n}" for n in "abcdefg"]
sys.exit(0 if ok else 1)
PY
)"; then
  pass "every test in exactly one shard, no shard empty ($report)"
else
  fail "shards do not partition the seven tests: $report"
fi

say "positional ids over a set: every shard fails, naming the difference"
"$BAZEL" test --nocache_test_results "$(test_events "$events")" //tools/selftest:probe_set_shards \
  >/dev/null 2>&1 || true
expect_shards "$events" //tools/selftest:probe_set_shards 2 FAILED "both shards failed"
if report="$(python3 - "$events" <<'PY'
import sys
from tools.results import bep
target = bep.read(sys.argv[1])["//tools/selftest:probe_set_shards"]
logs = [p.read_text() for p in target.log_files()]
named = [("collection differs between two processes" in log and "test_activation[case" in log) for log in logs]
print("shard logs naming the difference:", named)
sys.exit(0 if len(named) == 2 and all(named) else 1)
PY
)"; then
  pass "$report"
else
  fail "a shard did not name the unstable collection: $report"
fi
finish
