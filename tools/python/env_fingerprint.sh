#!/usr/bin/env bash
# Prints a short fingerprint of a Python environment and the host's GPUs, by file content
# (tools/python/env_fingerprint.py says what it covers and how it stays cheap).
# Used by tools/bazel on every command, and by tools/python/pypi.bzl for the record every test
# depends on: in host-interpreter mode (TORCH_TEST_PYTHON) for the whole environment, in pinned
# mode with --stdlib-only for the interpreter the @pypi venv links to.
# Usage: env_fingerprint.sh PYTHON [--stdlib-only] [--records]   (--records: print what is
# hashed, e.g. to diff two environments)
set -euo pipefail
python="$1"
shift
[[ -x $python ]] || { echo "env_fingerprint: $python is not an executable" >&2; exit 1; }
# -I: no PYTHONPATH or user site (tests see neither); -B: writes no .pyc; -S: no site dirs.
flags=(-I -B)
[[ " $* " == *" --stdlib-only "* ]] && flags+=(-S)
exec "$python" "${flags[@]}" "$(dirname "${BASH_SOURCE[0]}")/env_fingerprint.py" "$@"
