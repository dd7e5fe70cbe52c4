#!/usr/bin/env bash
# Cache correctness of pinned mode: an edit re-runs exactly the tests that depend on what
# changed, and nothing else.
#   1. nothing changed                  -> every probe (cached)
#   2. lock: tqdm's version moved       -> @pypi is re-fetched; only probe_tqdm re-runs
#   3. test_utils/versions.py edited    -> only probe_test_utils re-runs
#   4. test_utils/dtensor.py edited     -> only probe_dtensor re-runs; in the whole graph only
#                                          the DTensor targets depend on it
#   5. tools/test_times.bzl regenerated -> the same bytes; nothing re-runs
#   6. one recorded duration changed    -> only its target (probe_durations) re-runs; other
#                                          torch_tests (probe_shards: same runner) stay cached
# Edited files are restored on exit (the next build re-fetches @pypi once more).
source "$(dirname "$0")/lib.sh"
lock=third_party/python/requirements.lock
edited=(test_utils/versions.py test_utils/dtensor.py tools/test_times.bzl)
backup="$(mktemp -d)"
cp "$lock" "${edited[@]}" "$backup/"
restore() {
  for f in "$lock" "${edited[@]}"; do cp "$backup/$(basename "$f")" "$f"; done
  rm -rf "$backup"
}
trap restore EXIT

probes=(//tools/selftest:probe_plain //tools/selftest:probe_tqdm //tools/selftest:probe_test_utils
  //tools/selftest:probe_dtensor //tools/selftest:probe_durations //tools/selftest:probe_shards)
events="$backup/events.json"
# expect_only PROBE WHY: PROBE re-ran, every other probe came from the cache.
expect_only() {
  expect_result "$events" "$1" PASSED fresh "$1 re-ran ($2)"
  for p in "${probes[@]}"; do
    [[ $p == "$1" ]] || expect_result "$events" "$p" PASSED cached "$p stayed cached ($2)"
  done
}

say "baseline"
run_probes
run_probes
expect_all_cached "$events" "unchanged"

say "lock edit: tqdm moves to another release"
current="$(sed -n 's/^tqdm==\([^ ]*\).*/\1/p' "$lock")"
other=4.66.5
[[ $current != "$other" ]] || other=4.66.4
python3 -m pip download -q --no-deps --only-binary=:all: -d "$backup/wheel" "tqdm==$other"
hash="$(sha256sum "$backup"/wheel/tqdm-*.whl | cut -d' ' -f1)"
python3 - "$lock" "$other" "$hash" <<'PY'
import re, sys
path, version, digest = sys.argv[1:]
text = open(path).read()
text = re.sub(r"^tqdm==\S+ \\\n    --hash=sha256:\w+", f"tqdm=={version} \\\\\n    --hash=sha256:{digest}", text, flags=re.M)
open(path, "w").write(text)
PY
grep -q "^tqdm==$other" "$lock" || { fail "could not edit the lock"; finish; }
run_probes
expect_only //tools/selftest:probe_tqdm "lock edit"
expect_line "$(cat bazel-testlogs/tools/selftest/probe_tqdm/test.log)" "^tqdm $other" "probe_tqdm saw tqdm $other"

say "test_utils/versions.py edit"
echo "# edited by tools/selftest/check_cache.sh" >>test_utils/versions.py
run_probes
expect_only //tools/selftest:probe_test_utils "versions.py edit"

say "test_utils/dtensor.py edit"
echo "# edited by tools/selftest/check_cache.sh" >>test_utils/dtensor.py
run_probes
expect_only //tools/selftest:probe_dtensor "dtensor.py edit"
# The real targets: every test that depends on dtensor.py is a DTensor test.
dependents="$("$BAZEL" query 'kind(py_test, rdeps(//..., //test_utils:dtensor.py))' 2>/dev/null | sort | tr '\n' ' ')"
expect_line "$dependents" "^//distributed_tests:test_embedding_ops //distributed_tests:test_embedding_ops_gpu_x4 //distributed_tests:test_embedding_ops_multi_gpu //test_utils/tests:test_distributed_harness //tools/selftest:probe_dtensor $" \
  "only DTensor targets depend on test_utils/dtensor.py (got: $dependents)"

say "tools/test_times.bzl regenerated with unchanged numbers"
: >"$backup/no_events.json" # an invocation that tested nothing: every record is kept
python3 tools/update_test_times.py "$backup/no_events.json" >/dev/null
if cmp -s tools/test_times.bzl "$backup/test_times.bzl"; then
  pass "regenerated file is byte-identical"
else
  fail "regenerating changed tools/test_times.bzl: $(diff "$backup/test_times.bzl" tools/test_times.bzl | head -5)"
fi
run_probes
expect_all_cached "$events" "regenerated"

say "one recorded duration changed"
python3 - <<'PY'
import sys
sys.path.insert(0, ".")
from tools import update_test_times as u
times, peaks = u.read()
cases = times["//tools/selftest:probe_durations"]
cases[min(cases)] += 1.0
u.TIMES.write_text(u.render(times, peaks))
PY
run_probes
expect_only //tools/selftest:probe_durations "duration changed"
finish
