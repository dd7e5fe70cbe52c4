#!/usr/bin/env bash
# Pinned mode keys cached results on the interpreter the @pypi venv links to (its binary and
# stdlib, by content: tools/python/env_fingerprint.sh --stdlib-only). With a private copy of
# this host's Python as PYTHON_BIN (the system one is never edited), //tools/selftest:probe_plain
# (it imports json) is
#   1. (cached) on a second run with nothing changed
#   2. re-run after a stdlib module is edited (standing in for a patch release of the Python
#      on PATH)
#   3. re-run after an edit that keeps the module's size and mtime (`touch -r`)
# Cheap: a small lock (pytest and its dependencies, hashes from the pinned lock) through
# TORCH_TEST_LOCK, in its own output base, so the workspace's server and @pypi are left alone.
source "$(dirname "$0")/lib.sh"
private_output_base torch_test_pinned_interp

# A copy of the Python prefix: binary and stdlib (no tests, no site-packages but pip, which the
# fetch runs). Python finds its stdlib beside the binary it was started as.
read -r real version stdlib < <(python3 -c 'import os, sys, sysconfig
print(os.path.realpath(sys.executable), "%d.%d" % sys.version_info[:2], sysconfig.get_paths()["stdlib"])')
copy="$scratch/python"
mkdir -p "$copy/bin" "$copy/lib/python$version/site-packages"
cp "$real" "$copy/bin/python$version"
tar -C "$stdlib" --exclude=site-packages --exclude=test --exclude=idlelib --exclude=tkinter \
  --exclude=turtledemo --exclude=ensurepip -cf - . | tar -C "$copy/lib/python$version" -xf -
cp -r "$stdlib/site-packages/pip" "$copy/lib/python$version/site-packages/"
export PYTHON_BIN="$copy/bin/python$version"
"$PYTHON_BIN" -c 'import json, pip' || { fail "the copied interpreter does not start"; finish; }
module="$copy/lib/python$version/json/__init__.py"

python3 -m tools.selftest.lock_subset third_party/python/requirements.lock \
  iniconfig packaging pluggy pygments pytest >"$scratch/small.lock"
export TORCH_TEST_LOCK="$scratch/small.lock"
probe=//tools/selftest:probe_plain
expect_probe() { expect_private_run "$probe" "$@"; }

say "baseline on the copied interpreter"
expect_probe fresh "probe ran"
expect_probe cached "unchanged interpreter: cached"

say "a stdlib module of the interpreter is edited"
echo "# edited by $(basename "$0")" >>"$module"
expect_probe fresh "edited stdlib: probe re-ran"
expect_probe cached "after the edit: cached again"

say "an edit that keeps the module's size and mtime (touch -r)"
cp -p "$module" "$scratch/reference"
sed -i 's/# edited by/# EDITED by/' "$module"
touch -r "$scratch/reference" "$module"
if [[ $(stat -c '%s %Y' "$module") == $(stat -c '%s %Y' "$scratch/reference") ]]; then
  expect_probe fresh "same size and mtime, new content: probe re-ran"
else
  fail "the edit changed the module's size or mtime; the case tests nothing"
fi
finish
