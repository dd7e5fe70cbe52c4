#!/usr/bin/env bash
# Bazel sharding through the runner: //tools/selftest:probe_shards (seven tests, shard_count 3)
# must run as three shards whose test.xml files list every test exactly once, each shard some.
source "$(dirname "$0")/lib.sh"

out="$("$BAZEL" test --nocache_test_results //tools/selftest:probe_shards 2>&1)" || true
expect_line "$out" "$(fresh //tools/selftest:probe_shards)" "the sharded target passed"
expect_line "$out" "Stats over 3 runs" "Bazel ran three shards"

testlogs="$("$BAZEL" info bazel-testlogs 2>/dev/null)/tools/selftest/probe_shards"
if report="$(python3 - "$testlogs" <<'PY'
import pathlib, sys, xml.etree.ElementTree as ET
shards = sorted(pathlib.Path(sys.argv[1]).glob("shard_*_of_3/test.xml"))
cases = [[c.get("name") for c in ET.parse(x).getroot().iter("testcase")] for x in shards]
every = [name for shard in cases for name in shard]
print("shards:", [len(c) for c in cases], "cases:", sorted(every))
ok = len(shards) == 3 and all(cases) and sorted(every) == [f"test_{n}" for n in "abcdefg"]
sys.exit(0 if ok else 1)
PY
)"; then
  pass "every test in exactly one shard, no shard empty ($report)"
else
  fail "shards do not partition the seven tests: $report"
fi
finish
