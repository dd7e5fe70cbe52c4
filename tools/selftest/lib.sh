# Shared helpers for tools/selftest/*.sh. Source it; it cd's to the workspace root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
readonly BAZEL="${BAZEL:-tools/bazel}"
failures=0

# private_output_base NAME: a throw-away folder $scratch (/tmp/NAME.XXXXXX) whose output base
# keeps this check's Bazel server and cache apart from the workspace's; both go on exit.
# private_bazel COMMAND ARGS...: Bazel on that output base (--symlink_prefix=/: the workspace's
# bazel-* links keep pointing at the main output base).
private_output_base() {
  scratch="$(mktemp -d "/tmp/$1.XXXXXX")"
  trap '"$BAZEL" --output_base="$scratch/output_base" shutdown >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
}
private_bazel() { "$BAZEL" --output_base="$scratch/output_base" "$1" --symlink_prefix=/ "${@:2}"; }

say() { printf '\n== %s\n' "$*"; }
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_line OUTPUT REGEX WHAT: passes if some line of OUTPUT matches REGEX.
expect_line() {
  if grep -Eq -- "$2" <<<"$1"; then
    pass "$3"
  else
    fail "$3 (no line matching /$2/); the output's summary lines (else its last lines):"
    grep -E '^//|ERROR' <<<"$1" | head -20 >&2 || tail -n 15 <<<"$1" >&2
  fi
}

# expect_no_line OUTPUT REGEX WHAT
expect_no_line() {
  if grep -Eq -- "$2" <<<"$1"; then fail "$3 (unexpected line matching /$2/)"; else pass "$3"; fi
}

# expect_all_cached OUTPUT WHY: every target of the caller's `probes` array came from the cache.
expect_all_cached() {
  local p
  for p in "${probes[@]}"; do expect_line "$1" "$(cached "$p")" "$2: $p cached"; done
}

# A test result line of Bazel's summary, e.g. cached_line //a:b -> "//a:b  (cached) PASSED".
cached() { echo "^$1 +\\(cached\\) PASSED"; }
fresh() { echo "^$1 +PASSED"; }

finish() {
  if ((failures)); then
    echo "$(basename "$0"): ${failures} check(s) failed" >&2
    exit 1
  fi
  echo "$(basename "$0"): all checks passed"
}
