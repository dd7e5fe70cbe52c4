#!/usr/bin/env bash
# Regenerates tools/remote/requirements.lock (BuildGrid and its whole dependency closure, exact
# versions + sha256) from requirements.in, for the Python the rig runs BuildGrid with (>= 3.13),
# keeping every pin that still fits (tools/python/lock.py, the repository's one lock writer).
# rig.sh installs the lock with --no-deps --require-hashes.
# Usage: tools/remote/update_lock.sh [PYTHON] [--upgrade NAME[==VER] ...]
#   (default PYTHON: what rig.sh would pick, see find_python)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${here}/rig_lib.sh"
python="$(find_python)"
if [[ $# -gt 0 && $1 != --* ]]; then python="$1"; shift; fi
exec python3 "${here}/../python/lock.py" compile --python "$python" --nodeps '' \
  --requirements "${here}/requirements.in" --lock "${here}/requirements.lock" "$@"
