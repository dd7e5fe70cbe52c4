#!/usr/bin/env bash
# A re-fetch of @pypi that yields the same bytes keeps every cached test result:
#   1. a fetch that fails (a wrong sha256 in the lock), then the original lock restored
#   2. a fetch interrupted (SIGINT) halfway through pip, then the original lock restored
# After each, every probe (including probe_test_utils, which depends on torch and so on the
# directories @pypi ships whole) must be (cached). Before generate_build.py stamped those
# directories' mtimes with their contents, each re-fetch re-ran probe_test_utils (and on the
# real suite every torch test, the 6.6 GiB BERT shard included).
# Costs two full fetches of @pypi (~2 min each); the lock is restored on exit.
source "$(dirname "$0")/lib.sh"
lock=third_party/python/requirements.lock
backup="$(mktemp -d)"
cp "$lock" "$backup/good.lock"
trap 'cp "$backup/good.lock" "$lock"; rm -rf "$backup"' EXIT

probes=(//tools/selftest:probe_plain //tools/selftest:probe_tqdm //tools/selftest:probe_test_utils)
events="$backup/events.json"

say "baseline"
run_probes
run_probes
expect_all_cached "$events" "unchanged"

say "a failed fetch (wrong sha256), then the original lock"
python3 -c "import re, sys; print(re.sub(r'sha256:[0-9a-f]{64}', 'sha256:' + '0' * 64, sys.stdin.read(), count=1), end='')" \
  <"$backup/good.lock" >"$lock"
if "$BAZEL" build //tools/selftest:probe_plain >/dev/null 2>&1; then fail "the bad lock built"; else pass "the bad lock failed to fetch"; fi
cp "$backup/good.lock" "$lock"
run_probes
expect_all_cached "$events" "after the failed fetch"

say "an interrupted fetch, then the original lock"
{ cat "$backup/good.lock"; echo "# edited by $(basename "$0")"; } >"$lock"
"$BAZEL" build //tools/selftest:probe_plain >/dev/null 2>&1 &
client=$!
# Interrupt once pip is installing this lock (its command line names this workspace's lock).
for _ in $(seq 600); do pgrep -f "pip install .*--requirement=$PWD/$lock" >/dev/null && break; sleep 0.1; done
sleep 3
kill -INT "$client"
wait "$client" && fail "the fetch finished before the interrupt" || pass "the fetch was interrupted"
cp "$backup/good.lock" "$lock"
run_probes
expect_all_cached "$events" "after the interrupted fetch"
finish
