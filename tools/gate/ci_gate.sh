#!/usr/bin/env bash
# CI's upgrade gate: the pinned lock (baseline) against the newest torch the package index
# serves (candidate: requirements.in with torch pinned there, torchrec/fbgemm moved to a release
# that loads with it; built once into a cached venv by tools/gate/candidate.py), over every
# regression test a CPU host runs: every target outside tools/ (the project's own checks test
# the runner and the gate on the pinned torch; an upgrade is not gated on them). Exit status is
# the gate's: 0 complete and green, 1 a regression, 4 incomplete (something ran on one side only), 2/3 bad input or Bazel failure.
# The tests that need torchrec are gated only when a torchrec/fbgemm release loads with the
# candidate; when none does, each is left out (found by query) and the measured reason is printed
# (and is in the report's package table as "absent").
# Usage: tools/gate/ci_gate.sh [TARGET...]   (default //... -//tools/...)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
spec="torch==2.15.0"
python="$(python3 tools/gate/candidate.py "$spec")"
if (($#)); then targets=("$@"); else targets=(//... -//tools/...); fi
reason="$(python3 tools/gate/candidate.py --missing-reason "$spec")"
if [[ -n $reason && $# -eq 0 ]]; then
  # Every gated test that needs torchrec, by query: the seed's and any file from elsewhere that
  # uses it, among the targets' patterns (`-PATTERN` is query's `- PATTERN`).
  gated="${targets[*]}"
  gated="${gated// -/ - }"
  mapfile -t needing < <(tools/bazel query "kind(py_test, rdeps($gated, @pypi//:torchrec))" 2>/dev/null)
  ((${#needing[@]})) || { echo "ci_gate: the query of the tests needing torchrec failed" >&2; exit 3; }
  for target in "${needing[@]}"; do
    echo "ci_gate: not gating $target on $spec: $reason"
    targets+=("-$target")
  done
fi
out="${GATE_REPORT_DIR:-$(mktemp -d /tmp/torch_tests_gate_report.XXXXXX)}"
status=0
python3 tools/gate/gate.py --baseline pinned --candidate "python:$python" --out "$out" \
  -- "${targets[@]}" || status=$?
# The report, in the log: verdict and regressions first.
[[ -f $out/report.md ]] && cat "$out/report.md"
exit "$status"
