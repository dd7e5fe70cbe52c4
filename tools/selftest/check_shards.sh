#!/usr/bin/env bash
# Bazel sharding through the runner: //tools/selftest:probe_shards (seven tests, shard_count 3)
# must run as three shards whose test.xml files list every test exactly once, each shard some.
source "$(dirname "$0")/lib.sh"

events="$(mktemp)"
trap 'rm -f "$events"' EXIT
out="$("$BAZEL" test --nocache_test_results --build_event_json_file="$events" \
  //tools/selftest:probe_shards 2>&1)" || true
expect_line "$out" "$(fresh //tools/selftest:probe_shards)" "the sharded target passed"
expect_line "$out" "Stats over 3 runs" "Bazel ran three shards"

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
finish
