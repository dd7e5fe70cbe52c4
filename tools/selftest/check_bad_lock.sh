#!/usr/bin/env bash
# A broken lock fails the fetch of @pypi, with pip's reason in Bazel's error output:
#   1. a malformed line          -> "Invalid requirement"
#   2. a wrong sha256            -> "THESE PACKAGES DO NOT MATCH THE HASHES"
#   3. a requirement with no hash -> "Hashes are required in --require-hashes mode"
#   4. a lock missing a dependency -> the requirement named (tools/python/generate_build.py
#      checks the installed lock's requirements at fetch time)
# Each case edits the lock of a throw-away copy of the workspace (the files git knows, local
# edits included) and builds //tools/selftest:probe_plain there, which needs @pypi's toolchain.
# The copy has its own output base, so this workspace's lock and the shared server's @pypi are
# never touched; copy and output base are removed and their server shut down on exit.
# Cheap: pip reads the whole lock before it downloads, and the bad hash is put on the first
# package, so cases 1-3 fail in seconds, before torch is fetched; case 4 locks iopath alone.
source "$(dirname "$0")/lib.sh"
scratch="$(mktemp -d /tmp/torch_test_bad_lock.XXXXXX)"
out=""
ws="$scratch/workspace"
lock=third_party/python/requirements.lock
scratch_bazel() { (cd "$ws" && "$BAZEL" --output_base="$scratch/output_base" "$@"); }
trap 'scratch_bazel shutdown >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT

mkdir -p "$ws"
git ls-files -z --cached --others --exclude-standard |
  tar --null --files-from=- --ignore-failed-read -cf - | tar -xf - -C "$ws"
cp "$ws/$lock" "$scratch/good.lock"

# fetch_with_lock WHAT EDIT_PROGRAM: builds with the lock edited by a python program (stdin: the
# good lock, stdout: the bad one); the build must fail. Its output is left in $out.
fetch_with_lock() {
  local what="$1" program="$2" start=$SECONDS
  python3 -c "$program" <"$scratch/good.lock" >"$ws/$lock"
  if out="$(scratch_bazel build //tools/selftest:probe_plain 2>&1)"; then
    fail "$what: the build succeeded"
  else
    pass "$what: the build failed in $((SECONDS - start)) s"
  fi
}

zeros="$(printf '0%.0s' {1..64})"

say "malformed line"
fetch_with_lock "malformed line" 'import sys; print("not a requirement!"); print(sys.stdin.read(), end="")'
expect_line "$out" "error occurred during the fetch of repository 'pypi'" "malformed: the fetch of @pypi failed"
expect_line "$out" "Invalid requirement: 'not a requirement!'" "malformed: pip's reason is shown"

say "wrong sha256 on the first package"
fetch_with_lock "wrong sha256" "import re, sys; print(re.sub(r'sha256:[0-9a-f]{64}', 'sha256:$zeros', sys.stdin.read(), count=1), end='')"
expect_line "$out" "error occurred during the fetch of repository 'pypi'" "wrong hash: the fetch of @pypi failed"
expect_line "$out" "THESE PACKAGES DO NOT MATCH THE HASHES" "wrong hash: pip's reason is shown"
expect_line "$out" "Expected sha256 $zeros" "wrong hash: the expected hash is named"

say "a requirement without a hash"
fetch_with_lock "missing hash" 'import sys; print("six==1.16.0"); print(sys.stdin.read(), end="")'
expect_line "$out" "error occurred during the fetch of repository 'pypi'" "no hash: the fetch of @pypi failed"
expect_line "$out" "Hashes are required in --require-hashes mode" "no hash: pip's reason is shown"

say "a lock missing a dependency: iopath without tqdm"
fetch_with_lock "missing dependency" 'import re, sys; print(re.search(r"^iopath==.*\n(    --hash=.*\n)+", sys.stdin.read(), re.M).group(0), end="")'
expect_line "$out" "error occurred during the fetch of repository 'pypi'" "missing dependency: the fetch of @pypi failed"
expect_line "$out" "iopath [^ ]+ requires tqdm: not in the lock" "missing dependency: the requirement is named"
finish
