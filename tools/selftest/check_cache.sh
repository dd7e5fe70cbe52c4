#!/usr/bin/env bash
# Cache correctness of pinned mode: an edit re-runs exactly the tests that depend on what
# changed, and nothing else.
#   1. nothing changed            -> every probe (cached)
#   2. lock: tqdm's version moved -> @pypi is re-fetched; only probe_tqdm re-runs
#   3. a test_utils source edited -> only probe_test_utils re-runs
# The lock and test_utils are restored on exit (the next build re-fetches @pypi once more).
source "$(dirname "$0")/lib.sh"
lock=third_party/python/requirements.lock
edited=test_utils/versions.py
backup="$(mktemp -d)"
cp "$lock" "$edited" "$backup/"
trap 'cp "$backup/$(basename "$lock")" "$lock"; cp "$backup/$(basename "$edited")" "$edited"; rm -rf "$backup"' EXIT

probes=(//tools/selftest:probe_plain //tools/selftest:probe_tqdm //tools/selftest:probe_test_utils)
run_probes() { "$BAZEL" test --test_summary=short "${probes[@]}" 2>&1; }

say "baseline"
run_probes >/dev/null
out="$(run_probes)"
for p in "${probes[@]}"; do expect_line "$out" "$(cached "$p")" "unchanged: $p cached"; done

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
out="$(run_probes)"
expect_line "$out" "$(fresh //tools/selftest:probe_tqdm)" "probe_tqdm re-ran after the lock edit"
expect_line "$out" "$(cached //tools/selftest:probe_plain)" "probe_plain stayed cached"
expect_line "$out" "$(cached //tools/selftest:probe_test_utils)" "probe_test_utils stayed cached"
expect_line "$(cat bazel-testlogs/tools/selftest/probe_tqdm/test.log)" "^tqdm $other" "probe_tqdm saw tqdm $other"

say "test_utils edit"
echo "# edited by tools/selftest/check_cache.sh" >>"$edited"
out="$(run_probes)"
expect_line "$out" "$(fresh //tools/selftest:probe_test_utils)" "probe_test_utils re-ran"
expect_line "$out" "$(cached //tools/selftest:probe_plain)" "probe_plain stayed cached"
expect_line "$out" "$(cached //tools/selftest:probe_tqdm)" "probe_tqdm stayed cached"
finish
