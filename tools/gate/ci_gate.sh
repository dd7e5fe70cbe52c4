#!/usr/bin/env bash
# CI's upgrade gate: the pinned lock (baseline) against a venv of the newest torch pip serves
# here (candidate), over every target a CPU host runs; fails on any regression.
# The venv is created once per requirement list under ~/.cache/torch_tests/ and reused while
# that list is unchanged (a stamp marks a finished install; an interrupted one is redone).
# Usage: tools/gate/ci_gate.sh [TARGET...]   (default //...)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# The candidate environment, as a user gating the upgrade would install it.
requirements=(torch==2.14.1 pytest transformers numpy)
key="$(printf '%s\n' "${requirements[@]}" | sha256sum | cut -c1-12)"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/torch_tests/venv-torch-2.14.1-${key}"
if [[ ! -e $venv/.installed ]]; then
  echo "ci_gate: installing ${requirements[*]} into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${requirements[@]}"
  touch "$venv/.installed"
fi
out="${GATE_REPORT_DIR:-$(mktemp -d /tmp/torch_tests_gate_report.XXXXXX)}"
status=0
python3 tools/gate/gate.py --baseline pinned --candidate "python:$venv/bin/python" --out "$out" \
  "${@:-//...}" || status=$?
# The report, in the log: regressions first.
[[ -f $out/report.md ]] && cat "$out/report.md"
exit "$status"
