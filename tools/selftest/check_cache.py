"""Cache correctness of pinned mode: an edit re-runs exactly the tests that depend on what
changed, and nothing else.

  1. nothing changed                  -> every probe (cached)
  2. lock: tqdm's version moved       -> @pypi is re-fetched; only probe_tqdm re-runs
  3. test_utils/versions.py edited    -> only probe_test_utils re-runs
  4. test_utils/dtensor.py edited     -> only probe_dtensor re-runs; in the whole graph only
                                         the DTensor targets depend on it
  5. tools/test_times.bzl regenerated -> the same bytes; nothing re-runs
  6. one recorded duration changed    -> only its target (probe_durations) re-runs; other
                                         torch_tests (probe_shards: same runner) stay cached
  7. 5,000 recorded cases              -> probe_durations still starts and passes (inline in
                                         its spec's environment string they would pass
                                         Linux's 128 KiB for one string: E2BIG)

The edits are made in the harness's scratch copy of the workspace (tools/selftest/harness.py);
the workspace's own files are never touched.
"""

import hashlib
import re
import subprocess
import sys

from tools import update_test_times
from tools.python import lock
from tools.selftest.harness import Checks, Scratch

LOCK = "third_party/python/requirements.lock"
PROBES = [
    "//tools/selftest:probe_plain",
    "//tools/selftest:probe_tqdm",
    "//tools/selftest:probe_test_utils",
    "//tools/selftest:probe_dtensor",
    "//tools/selftest:probe_durations",
    "//tools/selftest:probe_shards",
]
DTENSOR_DEPENDENTS = [
    "//distributed_tests:test_embedding_ops",
    "//distributed_tests:test_embedding_ops_gpu_x4",
    "//distributed_tests:test_embedding_ops_multi_gpu",
    "//test_utils/tests:test_distributed_harness",
    "//tools/selftest:probe_dtensor",
]
EDITED = "# edited by tools/selftest/check_cache.py\n"


def other_tqdm(scratch, checks) -> str | None:
    """Moves the scratch lock's tqdm to another release (downloaded, for its sha256)."""
    path = scratch.root / LOCK
    pins = lock.read(path)
    other = "4.66.4" if pins["tqdm"].version == "4.66.5" else "4.66.5"
    wheels = scratch.tmp / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        + ["-d", str(wheels), f"tqdm=={other}"],
        check=True,
    )
    (wheel,) = wheels.glob("tqdm-*.whl")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    pins["tqdm"] = lock.Pin("tqdm", other, (f"sha256:{digest}",))
    path.write_text(lock.render(pins))
    if lock.versions(path)["tqdm"] != other:
        checks.fail("could not edit the lock")
        return None
    return other


def main() -> int:
    checks = Checks("check_cache")
    with Scratch() as scratch:
        bazel = scratch.bazel

        def run_probes():
            return bazel.test("--test_summary=short", *PROBES)

        def expect_all_cached(run, why):
            for probe in PROBES:
                run.expect(checks, probe, "PASSED", "cached", f"{why}: {probe} cached")

        def expect_only(run, changed, why):
            """CHANGED re-ran, every other probe came from the cache."""
            run.expect(checks, changed, "PASSED", "fresh", f"{changed} re-ran ({why})")
            for probe in PROBES:
                if probe != changed:
                    run.expect(checks, probe, "PASSED", "cached", f"{probe} stayed cached ({why})")

        checks.say("baseline")
        run_probes()
        expect_all_cached(run_probes(), "unchanged")

        checks.say("lock edit: tqdm moves to another release")
        other = other_tqdm(scratch, checks)
        if other is None:
            return checks.finish()
        run = run_probes()
        expect_only(run, "//tools/selftest:probe_tqdm", "lock edit")
        tqdm = run.targets.get("//tools/selftest:probe_tqdm")
        logs = "".join(p.read_text() for p in tqdm.log_files()) if tqdm else ""
        checks.expect(
            re.search(rf"^tqdm {re.escape(other)}", logs, re.M) is not None,
            f"probe_tqdm saw tqdm {other}",
            f"its test.log: {logs[-300:]!r}",
        )

        checks.say("test_utils/versions.py edit")
        with open(scratch.root / "test_utils/versions.py", "a") as f:
            f.write(EDITED)
        expect_only(run_probes(), "//tools/selftest:probe_test_utils", "versions.py edit")

        checks.say("test_utils/dtensor.py edit")
        with open(scratch.root / "test_utils/dtensor.py", "a") as f:
            f.write(EDITED)
        expect_only(run_probes(), "//tools/selftest:probe_dtensor", "dtensor.py edit")
        # The real targets: every test that depends on dtensor.py is a DTensor test.
        query = bazel.run("query", "kind(py_test, rdeps(//..., //test_utils:dtensor.py))")
        dependents = sorted(query.stdout.split()) if query.returncode == 0 else []
        checks.expect(
            dependents == DTENSOR_DEPENDENTS,
            "only DTensor targets depend on test_utils/dtensor.py",
            f"got: {' '.join(dependents) or query.stderr[-500:]}",
        )

        checks.say("tools/test_times.bzl regenerated with unchanged numbers")
        times = scratch.root / "tools/test_times.bzl"
        before = times.read_bytes()
        no_events = scratch.tmp / "no_events.json"
        no_events.write_text("")  # an invocation that tested nothing: every record is kept
        subprocess.run(
            [sys.executable, "tools/update_test_times.py", str(no_events)],
            cwd=scratch.root,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        checks.expect(
            times.read_bytes() == before,
            "regenerated file is byte-identical",
            "regenerating changed tools/test_times.bzl",
        )
        expect_all_cached(run_probes(), "regenerated")

        checks.say("one recorded duration changed")
        recorded, peaks = update_test_times.read(times)
        cases = recorded["//tools/selftest:probe_durations"]
        cases[min(cases)] += 1.0
        times.write_text(update_test_times.render(recorded, peaks))
        expect_only(run_probes(), "//tools/selftest:probe_durations", "duration changed")

        checks.say("5,000 recorded cases: a packed upstream target's record")
        cases.update({f"{min(cases)}_{i:04d}_{'x' * 60}": 0.5 for i in range(5000 - len(cases))})
        times.write_text(update_test_times.render(recorded, peaks))
        expect_only(run_probes(), "//tools/selftest:probe_durations", "5,000 recorded cases")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
