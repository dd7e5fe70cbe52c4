# Shared helpers for tools/selftest/*.sh (the checks in Python use harness.py). Source it; it
# cd's to the workspace root.
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
# expect_private_run LABEL CACHE WHAT: `private_bazel test LABEL` PASSED, CACHE (cached, or
# fresh: it re-ran), judged from its build event file; Bazel's output in $scratch/bazel.log.
expect_private_run() {
  local events="$scratch/events.json"
  private_bazel test "$(test_events "$events")" "$1" >"$scratch/bazel.log" 2>&1 || true
  expect_result "$events" "$1" PASSED "$2" "$3"
}

say() { printf '\n== %s\n' "$*"; }
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_line OUTPUT REGEX WHAT: passes if some line of OUTPUT matches REGEX.
expect_line() {
  if grep -Eq -- "$2" <<<"$1"; then
    pass "$3"
  else
    fail "$3 (no line matching /$2/); the output's ERROR lines (else its last lines):"
    grep -E 'ERROR' <<<"$1" | head -20 >&2 || tail -n 15 <<<"$1" >&2
  fi
}

# expect_no_line OUTPUT REGEX WHAT
expect_no_line() {
  if grep -Eq -- "$2" <<<"$1"; then fail "$3 (unexpected line matching /$2/)"; else pass "$3"; fi
}

# Test results are judged from the build event file of the `bazel test` that produced them
# (tools/results/outcomes.py on tools/results/bep.py), never from Bazel's printed summary.
# test_events FILE: the flag that makes `bazel test` write FILE; removes FILE first, so an
# invocation that stops before writing it is not judged by an earlier one's events.
test_events() {
  rm -f "$1"
  echo "--build_event_json_file=$1"
}

# outcomes EVENTS [--expect ...]: the outcome of every target, one line each
# (LABEL STATUS cached|fresh [shards N: ...]), or one expectation (tools/results/outcomes.py).
outcomes() { python3 -m tools.results.outcomes "$@"; }

# judge WHAT EVENTS ARGS...: pass if `outcomes EVENTS ARGS...` agrees, else fail with what it found.
judge() {
  local what="$1" found
  if found="$(outcomes "${@:2}" 2>&1)"; then pass "$what"; else fail "${what} (${found})"; fi
}

# expect_result EVENTS LABEL STATUS CACHE WHAT: LABEL's result is STATUS (PASSED, FAILED, SKIPPED,
# TIMEOUT, FLAKY, NO STATUS, ...; !STATUS: anything else, no result included), and CACHE is
# cached (Bazel's "(cached)"), fresh (it ran) or any.
expect_result() { judge "$5" "$1" --expect "$2" "$3" "$4"; }

# expect_no_result EVENTS STATUS WHAT: no target's result is STATUS.
expect_no_result() { judge "$3" "$1" --expect-none "$2"; }

finish() {
  if ((failures)); then
    echo "$(basename "$0"): ${failures} check(s) failed" >&2
    exit 1
  fi
  echo "$(basename "$0"): all checks passed"
}
