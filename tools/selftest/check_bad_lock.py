"""A broken lock fails the fetch of @pypi, with pip's reason in Bazel's error output:

  1. a malformed line            -> "Invalid requirement"
  2. a wrong sha256              -> "THESE PACKAGES DO NOT MATCH THE HASHES"
  3. a requirement with no hash  -> "Hashes are required in --require-hashes mode"
  4. a lock missing a dependency -> the requirement named (tools/python/generate_build.py
     checks the installed lock's requirements at fetch time)

Each case edits the lock of the harness's scratch copy of the workspace
(tools/selftest/harness.py) and builds //tools/selftest:probe_plain there, which needs @pypi's
toolchain; the workspace's own lock and @pypi are never touched.
Cheap: pip reads the whole lock before it downloads, and the bad hash is put on the first
package, so cases 1-3 fail in seconds, before torch is fetched; case 4 locks iopath alone.
"""

import re
import sys
import time

from tools.selftest.harness import Checks, Scratch

LOCK = "third_party/python/requirements.lock"
FETCH_FAILED = "error occurred during the fetch of repository 'pypi'"
ZEROS = "0" * 64


def malformed(good: str) -> str:
    return "not a requirement!\n" + good


def wrong_hash(good: str) -> str:
    return re.sub(r"sha256:[0-9a-f]{64}", f"sha256:{ZEROS}", good, count=1)


def unhashed(good: str) -> str:
    return "six==1.16.0\n" + good


def iopath_alone(good: str) -> str:
    return re.search(r"^iopath==.*\n(    --hash=.*\n)+", good, re.M).group(0)


def main() -> int:
    checks = Checks("check_bad_lock")
    with Scratch(seed=False) as scratch:  # every fetch here fails: no @pypi needed
        lock = scratch.root / LOCK
        good = lock.read_text()

        def fetch_with_lock(what, edit) -> str:
            """Builds with the lock EDIT makes of the good one; the build must fail. Returns
            Bazel's output."""
            lock.write_text(edit(good))
            start = time.monotonic()
            built = scratch.bazel.run("build", "//tools/selftest:probe_plain")
            took = f"{time.monotonic() - start:.0f} s"
            checks.expect(built.returncode != 0, f"{what}: the build failed in {took}", "it built")
            return built.stderr + built.stdout

        def expect_line(out, pattern, what):
            found = re.search(pattern, out, re.M) is not None
            errors = [line for line in out.splitlines() if "ERROR" in line][:20]
            checks.expect(found, what, f"no line matching /{pattern}/; ERROR lines: {errors}")

        checks.say("malformed line")
        out = fetch_with_lock("malformed line", malformed)
        expect_line(out, FETCH_FAILED, "malformed: the fetch of @pypi failed")
        expect_line(
            out, "Invalid requirement: 'not a requirement!'", "malformed: pip's reason is shown"
        )

        checks.say("wrong sha256 on the first package")
        out = fetch_with_lock("wrong sha256", wrong_hash)
        expect_line(out, FETCH_FAILED, "wrong hash: the fetch of @pypi failed")
        expect_line(
            out, "THESE PACKAGES DO NOT MATCH THE HASHES", "wrong hash: pip's reason is shown"
        )
        expect_line(out, f"Expected sha256 {ZEROS}", "wrong hash: the expected hash is named")

        checks.say("a requirement without a hash")
        out = fetch_with_lock("missing hash", unhashed)
        expect_line(out, FETCH_FAILED, "no hash: the fetch of @pypi failed")
        expect_line(
            out, "Hashes are required in --require-hashes mode", "no hash: pip's reason is shown"
        )

        checks.say("a lock missing a dependency: iopath without tqdm")
        out = fetch_with_lock("missing dependency", iopath_alone)
        expect_line(out, FETCH_FAILED, "missing dependency: the fetch of @pypi failed")
        expect_line(
            out,
            "iopath [^ ]+ requires tqdm: not in the lock",
            "missing dependency: the requirement is named",
        )
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
