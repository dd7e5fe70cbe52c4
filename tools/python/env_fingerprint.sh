#!/usr/bin/env bash
# Prints a short, cheap fingerprint of a Python environment and the host's GPUs:
# the interpreter's real path, the names of its installed distributions (dist-info names carry
# versions) and nvidia-smi's GPU list with the driver version. Used by tools/bazel to notice a
# changed image in host-interpreter mode; the full record is written by tools/python/pypi.bzl.
# Usage: env_fingerprint.sh PYTHON
set -euo pipefail
python="$1"
[[ -x $python ]] || { echo "env_fingerprint: $python is not an executable" >&2; exit 1; }
{
  readlink -f "$python"
  "$python" -c 'import site, sys; print(sys.version); print("\n".join(site.getsitepackages()))' |
    while read -r line; do
      echo "$line"
      [[ -d $line ]] && ls "$line" | grep -E '\.(dist|egg)-info$' || true
    done
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
  fi
} | sha256sum | cut -c1-16
