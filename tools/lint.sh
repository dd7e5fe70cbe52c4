#!/usr/bin/env bash
# Formats and lints the repository: buildifier for BUILD/.bzl/WORKSPACE, ruff for Python.
# Usage: tools/lint.sh [--check]   (--check: report, change nothing; non-zero on findings)
# Needs: buildifier (npm install -g @bazel/buildifier) and ruff (pip install ruff).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=fix
[[ ${1:-} == --check ]] && mode=check
# The native-* lints point at rulesets that do not exist offline for Bazel 4.2.3, and the
# rules_cc shim forwards native rules on purpose.
warnings="-native-py,-native-sh-binary,-native-cc-binary,-native-cc-import,-native-cc-library"
warnings+=",-native-cc-proto,-native-cc-test,-native-cc-toolchain,-native-cc-toolchain-suite"
warnings+=",-native-cc-fdo-prefetch-hints,-native-cc-fdo-profile,-native-cc-objc-import"
warnings+=",-native-cc-objc-library"
mapfile -t starlark < <(git ls-files '*.bazel' '*.bzl' 'WORKSPACE' '*/BUILD' 'BUILD')
buildifier --mode="$mode" --lint=warn --warnings="$warnings" "${starlark[@]}"
if [[ $mode == fix ]]; then
  ruff format . && ruff check --fix .
else
  ruff format --check . && ruff check .
fi
