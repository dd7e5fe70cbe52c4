#!/usr/bin/env bash
# Regenerates third_party/python/requirements.lock from requirements*.in, keeping every pin that
# still fits: adding or bumping one package moves only what it needs, and what changed is
# printed. The resolving is uv's (tools/python/lock.py installs its pinned, hashed locker on
# first use); the lock lists the whole closure for the Python that runs this, because
# tools/python/pypi.bzl installs it with --no-deps --require-hashes.
# Usage: tools/python/update_lock.sh [--upgrade NAME[==VER] ...]   (PYTHON=python3 by default)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
exec "${PYTHON:-python3}" "${root}/tools/python/lock.py" compile "$@"
