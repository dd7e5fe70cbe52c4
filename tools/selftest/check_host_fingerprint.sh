#!/usr/bin/env bash
# Host-interpreter mode keys cached results on the environment's files, not only its package
# versions: with a throw-away venv as TORCH_TEST_PYTHON, //tools/selftest:probe_plain is
#   1. (cached) on a second run with nothing changed
#   2. re-run after a file of an installed package is patched (same version, new content)
#   3. re-run after a file is added to site-packages, and after one is removed
#   4. (cached) when a file's .pyc cache is written (__pycache__ is left out)
#   5. re-run after edits that keep a file's size and mtime (`touch -r`; `cp -p` of an edited
#      copy), as rsync -a, tar and image layers with normalised timestamps make them
#   6. re-run after an edit of a package installed editable through setuptools' finder
#      (`__editable___*_finder.py` MAPPING; no .pth path names its sources)
# Cheap: the venv has no torch, the probe imports json. A small lock (pytest and its
# dependencies, hashes from the pinned lock) through TORCH_TEST_LOCK, installed into the venv:
# each re-fetch of @pypi (every environment change above) finds every locked package present
# and downloads nothing. Uses its own output base, so the pinned-mode server and cache are left
# alone.
source "$(dirname "$0")/lib.sh"
private_output_base torch_test_host_fp

python3 -m venv "$scratch/venv"
export TORCH_TEST_PYTHON="$scratch/venv/bin/python3"
python3 -m tools.selftest.lock_subset third_party/python/requirements.lock \
  iniconfig packaging pluggy pygments pytest >"$scratch/small.lock"
export TORCH_TEST_LOCK="$scratch/small.lock"
"$TORCH_TEST_PYTHON" -m pip install -q --no-deps --require-hashes -r "$TORCH_TEST_LOCK" \
  >"$scratch/pip.log" 2>&1 || { fail "pip install of the small lock: $(tail -3 "$scratch/pip.log")"; finish; }
site="$("$TORCH_TEST_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
probe=//tools/selftest:probe_plain
expect_probe() { expect_private_run "$probe" "$@"; }

say "baseline on the host interpreter"
expect_probe fresh "probe ran on the host interpreter"
expect_probe cached "unchanged environment: cached"

say "a file of an installed package is patched, its version unchanged"
echo "# patched by $(basename "$0")" >>"$site/pip/__init__.py"
expect_probe fresh "patched file: probe re-ran"
expect_probe cached "after the patch: cached again"

say "a file is added to site-packages; one is removed"
echo "X = 1" >"$site/torch_test_added.py"
expect_probe fresh "added file: probe re-ran"
rm "$site/pip/py.typed"
expect_probe fresh "removed file: probe re-ran"

say "the interpreter writes .pyc caches"
"$TORCH_TEST_PYTHON" -c 'import pip._internal.cli.main'
expect_probe cached "__pycache__ writes: still cached"

# same_stat FILE REFERENCE: FILE has REFERENCE's size and mtime (else the case tests nothing).
same_stat() { [[ $(stat -c '%s %Y' "$1") == $(stat -c '%s %Y' "$2") ]]; }
say "edits that keep size and mtime"
target="$site/pip/__init__.py"
cp -p "$target" "$scratch/reference"
sed -i 's/# patched by/# PATCHED by/' "$target"
touch -r "$scratch/reference" "$target"
same_stat "$target" "$scratch/reference" || fail "touch -r case: size or mtime changed"
expect_probe fresh "touch -r: same size and mtime, probe re-ran"
cp -p "$target" "$scratch/edited"
sed -i 's/# PATCHED by/# pAtched by/' "$scratch/edited"
touch -r "$target" "$scratch/edited"
cp -p "$scratch/edited" "$target"
same_stat "$target" "$scratch/reference" || fail "cp -p case: size or mtime changed"
expect_probe fresh "cp -p: same size and mtime, probe re-ran"

say "an editable install through setuptools' finder (package-dir elsewhere: a MAPPING, no .pth path)"
project="$scratch/project"
mkdir -p "$project/lib"
echo "VALUE = 1" >"$project/lib/__init__.py"
cat >"$project/pyproject.toml" <<'TOML'
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "torch_test_editable"
version = "0.1"

[tool.setuptools]
packages = ["torch_test_editable"]
package-dir = {"torch_test_editable" = "lib"}
TOML
"$TORCH_TEST_PYTHON" -m pip install -q -e "$project" >"$scratch/pip.log" 2>&1 ||
  fail "pip install -e failed: $(tail -3 "$scratch/pip.log")"
ls "$site"/__editable___torch_test_editable_*_finder.py >/dev/null 2>&1 ||
  fail "setuptools wrote no finder: the case tests nothing"
grep -qs "$project" "$site"/*.pth && fail "a .pth names the project: the case tests nothing"
expect_probe fresh "editable install: probe re-ran"
expect_probe cached "after the install: cached again"
echo "VALUE = 2" >"$project/lib/__init__.py"
expect_probe fresh "edit of the editable package's source: probe re-ran"
finish
