#!/usr/bin/env bash
# Prints a short fingerprint of a Python environment and the host's GPUs, which changes when
# anything a test could import changes: the interpreter's real path and version, a stat record
# (path, size, mtime in ns, link target) of every file in every directory on its sys.path (stdlib,
# lib-dynload, site-packages, directories that .pth files add, e.g. editable installs) and
# nvidia-smi's GPU list with the driver version. A patched file (new mtime or size), an added
# and a removed file all change it, also without a version change.
# Left out: __pycache__ (Python re-validates .pyc against its source's mtime and size, and
# running the interpreter writes them), directories' own mtimes (entries are listed; creating
# a __pycache__ would change them) and site directories of a base interpreter that are not
# on this one's sys.path (a venv's base). Cost: bench/fingerprint_cost.sh (one find over ~36k
# files: ~0.1-0.2 s warm).
# Used by tools/bazel on every command in host-interpreter mode (TORCH_TEST_PYTHON), and by
# tools/python/pypi.bzl for the record every test depends on.
# Usage: env_fingerprint.sh PYTHON [--records]   (--records: print what is hashed, e.g. to
# diff two environments)
set -euo pipefail
python="$1"
hash() { sha256sum | cut -c1-16; }
[[ ${2:-} == --records ]] && hash() { cat; }
[[ -x $python ]] || { echo "env_fingerprint: $python is not an executable" >&2; exit 1; }
# Line 1: the version; then "root DIR" and "prune DIR" lines. -I: no PYTHONPATH or user site
# (tests see neither); -B: writes no .pyc.
layout="$("$python" -I -B -c '
import os, sys
print(sys.version.replace("\n", " "))
paths = sorted({os.path.realpath(p) for p in sys.path if p and os.path.exists(p)})
roots = [p for p in paths if not any(p.startswith(r + "/") for r in paths)]
print("\n".join("root " + r for r in roots))
for r in roots:
    for name in ("site-packages", "dist-packages"):
        nested = os.path.join(r, name)
        if os.path.isdir(nested) and nested not in paths:
            print("prune " + nested)
')"
roots=() prune=(-name __pycache__)
while read -r kind dir; do
  case $kind in
    root) roots+=("$dir") ;;
    prune) prune+=(-o -path "$dir") ;;
  esac
done <<<"$layout"
{
  readlink -f "$python"
  echo "$layout"
  ((${#roots[@]} == 0)) || find "${roots[@]}" \( "${prune[@]}" \) -prune -o ! -type d -printf '%p %s %T@ %l\n'
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
  fi
} | hash
