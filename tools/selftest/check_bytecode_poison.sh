#!/usr/bin/env bash
# No test can change the code a later target runs through the bytecode tests read
# (tools/runner/bytecode.py). Host-interpreter mode with a throw-away venv whose torch (a
# stand-in, version 1.0.0) ships no bytecode, as the GPU image's does:
#   1. //tools/selftest:probe_bytecode_forge writes an entry for torch/__init__.py where its
#      interpreter looks for bytecode, headed like the real one (so Python's mtime/size or
#      source-hash validation accepts it), saying torch is 6.66.6
#   2. //tools/selftest:probe_bytecode_victim, a different target run afterwards, must import
#      torch 1.0.0
# Cheap: the venv has pytest and the stand-in only, and the lock (TORCH_TEST_LOCK) names just
# those (pins and hashes from the pinned lock), so @pypi's fetch finds every locked package
# present and downloads nothing. Own output base; removed on exit.
source "$(dirname "$0")/lib.sh"
private_output_base torch_test_poison

python3 -m venv "$scratch/venv"
export TORCH_TEST_PYTHON="$scratch/venv/bin/python3"
# pytest as the pinned lock has it, into the venv; the tests' lock names it and torch.
python3 -m tools.selftest.lock_subset third_party/python/requirements.lock \
  iniconfig packaging pluggy pygments pytest >"$scratch/pytest.lock"
PYTHONDONTWRITEBYTECODE=1 "$TORCH_TEST_PYTHON" -m pip install -q --no-compile --no-deps \
  --require-hashes -r "$scratch/pytest.lock" >/dev/null 2>&1 ||
  { fail "pip install pytest into the venv"; finish; }
python3 -m tools.selftest.lock_subset third_party/python/requirements.lock \
  iniconfig packaging pluggy pygments pytest torch >"$scratch/small.lock"
export TORCH_TEST_LOCK="$scratch/small.lock"
site="$("$TORCH_TEST_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
mkdir -p "$site/torch" "$site/torch-1.0.0.dist-info"
printf 'from . import cuda, version\n__version__ = "1.0.0"\n' >"$site/torch/__init__.py"
echo 'cuda = None' >"$site/torch/version.py"
printf 'def is_initialized():\n    return False\n' >"$site/torch/cuda.py" # the runner asks
printf 'Metadata-Version: 2.1\nName: torch\nVersion: 1.0.0\n' >"$site/torch-1.0.0.dist-info/METADATA"

say "a test forges torch's bytecode; a later target imports torch"
events="$scratch/events.json"
out="$(private_bazel test --test_output=all "$(test_events "$events")" \
  //tools/selftest:probe_bytecode_forge 2>&1 || true)"
expect_result "$events" //tools/selftest:probe_bytecode_forge PASSED fresh "the forging test ran"
grep -E "forged|could not forge" <<<"$out" | head -2 || true
out="$(private_bazel test --test_output=errors "$(test_events "$events")" \
  //tools/selftest:probe_bytecode_victim 2>&1 || true)"
expect_result "$events" //tools/selftest:probe_bytecode_victim PASSED fresh \
  "the later target imported the real torch"
grep -E "imported forged" <<<"$out" | head -2 || true
finish
