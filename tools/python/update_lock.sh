#!/usr/bin/env bash
# Regenerates third_party/python/requirements.lock from the two .in files: resolves the full
# dependency closure for this host's Python (CPython 3.11, Linux x86_64), downloads every wheel
# once and records its exact version and sha256. The lock is installed with --no-deps
# --require-hashes by tools/python/pypi.bzl, so it must list the whole closure.
# Usage: tools/python/update_lock.sh [PYTHON]   (default: python3)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${1:-python3}"
dir="${root}/third_party/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" -m pip download -q --only-binary=:all: -d "$work/wheels" -r "$dir/requirements.in"
"$python" -m pip download -q --only-binary=:all: --no-deps -d "$work/wheels" -r "$dir/requirements-nodeps.in"
"$python" "${root}/tools/python/write_lock.py" "$work/wheels" >"$dir/requirements.lock"
echo "wrote $dir/requirements.lock ($(grep -c '==' "$dir/requirements.lock") packages)"
