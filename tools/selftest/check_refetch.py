"""A re-fetch of @pypi that yields the same bytes keeps every cached test result:

  1. a fetch that fails (a wrong sha256 in the lock), then the original lock restored
  2. a fetch interrupted (SIGINT) halfway through pip, then the original lock restored

After each, every probe (including probe_test_utils, which depends on torch and so on the
directories @pypi ships whole) must be (cached). Before generate_build.py stamped those
directories' mtimes with their contents, each re-fetch re-ran probe_test_utils (and on the
real suite every torch test, the 6.6 GiB BERT shard included).
Costs two full fetches of @pypi, in the harness's scratch copy of the workspace
(tools/selftest/harness.py); the workspace's own lock and @pypi are never touched.
"""

import re
import signal
import subprocess
import sys
import time

from tools.selftest.harness import Checks, Scratch

LOCK = "third_party/python/requirements.lock"
PROBES = [
    "//tools/selftest:probe_plain",
    "//tools/selftest:probe_tqdm",
    "//tools/selftest:probe_test_utils",
]


def pip_installs(lock) -> bool:
    """Whether pip is installing LOCK (its command line names the lock)."""
    found = subprocess.run(
        ["pgrep", "-f", f"pip install .*--requirement={re.escape(str(lock))}"],
        stdout=subprocess.DEVNULL,
    )
    return found.returncode == 0


def main() -> int:
    checks = Checks("check_refetch")
    with Scratch() as scratch:
        bazel = scratch.bazel
        lock = scratch.root / LOCK
        good = lock.read_text()

        def run_probes():
            return bazel.test("--test_summary=short", *PROBES)

        def expect_all_cached(run, why):
            for probe in PROBES:
                run.expect(checks, probe, "PASSED", "cached", f"{why}: {probe} cached")

        checks.say("baseline")
        run_probes()
        expect_all_cached(run_probes(), "unchanged")

        checks.say("a failed fetch (wrong sha256), then the original lock")
        lock.write_text(re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, good, count=1))
        built = bazel.run("build", "//tools/selftest:probe_plain")
        checks.expect(built.returncode != 0, "the bad lock failed to fetch", "the bad lock built")
        lock.write_text(good)
        expect_all_cached(run_probes(), "after the failed fetch")

        checks.say("an interrupted fetch, then the original lock")
        lock.write_text(good + "# edited by tools/selftest/check_refetch.py\n")
        client = bazel.start("build", "//tools/selftest:probe_plain")
        # Interrupt once pip is installing this lock, a few seconds into it.
        for _ in range(600):
            if pip_installs(lock) or client.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(3)
        client.send_signal(signal.SIGINT)
        checks.expect(client.wait() != 0, "the fetch was interrupted", "it finished before")
        lock.write_text(good)
        expect_all_cached(run_probes(), "after the interrupted fetch")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
