#!/usr/bin/env bash
# Formats and lints the repository: buildifier for BUILD/.bzl/WORKSPACE, ruff for Python.
# Usage: tools/lint.sh [--check]   (--check: report, change nothing; non-zero on findings)
# Uses the pinned buildifier and ruff; where PATH lacks those versions (a fresh CI machine) it
# installs them once under LINT_TOOLS_DIR (default ~/.cache/torch_tests_lint): buildifier from
# npm (@bazel/buildifier, binaries bundled; npm itself from apt if missing, as root), ruff from
# PyPI into a venv. Other versions format differently, so the pins are the format's definition.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=fix
[[ ${1:-} == --check ]] && mode=check
readonly BUILDIFIER_VERSION=8.2.1 RUFF_VERSION=0.17.6
tools_dir="${LINT_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/torch_tests_lint}"

die() {
  echo "tools/lint.sh: $*" >&2
  exit 2
}

has_version() { # COMMAND VERSION: the command on PATH reports exactly VERSION
  command -v "$1" >/dev/null && "$1" --version 2>/dev/null | grep -qw -- "$2"
}

if ! has_version buildifier "$BUILDIFIER_VERSION"; then
  PATH="${tools_dir}/npm/node_modules/.bin:${PATH}"
  if ! has_version buildifier "$BUILDIFIER_VERSION"; then
    if ! command -v npm >/dev/null; then
      [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null || die "needs npm: apt-get install npm"
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >&2
    fi
    npm install --silent --prefix "${tools_dir}/npm" "@bazel/buildifier@${BUILDIFIER_VERSION}" >&2
    has_version buildifier "$BUILDIFIER_VERSION" || die "buildifier ${BUILDIFIER_VERSION} did not install"
  fi
fi
if ! has_version ruff "$RUFF_VERSION"; then
  PATH="${tools_dir}/venv/bin:${PATH}"
  if ! has_version ruff "$RUFF_VERSION"; then
    python3 -m venv "${tools_dir}/venv"
    "${tools_dir}/venv/bin/pip" install --quiet --disable-pip-version-check "ruff==${RUFF_VERSION}" >&2
    has_version ruff "$RUFF_VERSION" || die "ruff ${RUFF_VERSION} did not install"
  fi
fi
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
