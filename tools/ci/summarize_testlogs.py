"""Per-target test-case counts from Bazel's test.xml files, for CI logs and closing notes.

    python3 tools/ci/summarize_testlogs.py BAZEL_OUTPUT.log

Reads the targets Bazel reported as PASSED/FAILED in the given `bazel test` output, then each
target's test.xml (all shards of its newest layout). Prints one row per target and a closing line
"N passed, N failed" (xfail = expected failures, reported separately).
"""

import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

RESULT = re.compile(r"^(//\S+)\s+(?:\(cached\) )?(PASSED|FAILED|TIMEOUT|FLAKY)\b")
SHARD_DIR = re.compile(r"shard_\d+_of_(\d+)")


def targets_in(log: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in map(RESULT.match, log.splitlines()) if m]


def xml_files(testlogs: pathlib.Path, label: str) -> list[pathlib.Path]:
    """The target's test.xml, or one per shard, from the newest single-run layout.

    Earlier invocations leave other layouts behind: another shard_count's shard_I_of_N dirs,
    --runs_per_test's shard_I_of_N_run_J_of_M dirs. Counting them would count cases twice.
    """
    package, name = label[2:].split(":")
    base = testlogs / package / name
    layouts = {}  # shard count (0: unsharded) -> its test.xml files
    if (base / "test.xml").is_file():
        layouts[0] = [base / "test.xml"]
    for path in base.glob("shard_*/test.xml"):
        if match := SHARD_DIR.fullmatch(path.parent.name):
            layouts.setdefault(int(match.group(1)), []).append(path)
    if not layouts:
        return []
    return sorted(max(layouts.values(), key=lambda files: max(f.stat().st_mtime for f in files)))


def count_cases(files) -> dict:
    counts = {"passed": 0, "failed": 0, "xfail": 0, "skipped": 0}
    for path in files:
        for case in ET.parse(path).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                counts["failed"] += 1
            elif (skip := case.find("skipped")) is not None:
                kind = "xfail" if "xfail" in (skip.get("type") or "") else "skipped"
                counts[kind] += 1
            else:
                counts["passed"] += 1
    return counts


def main(log_path: str) -> int:
    # Ask Bazel: the bazel-testlogs link may point at another output base's logs.
    testlogs = pathlib.Path(
        subprocess.check_output(["tools/bazel", "info", "bazel-testlogs"], text=True).strip()
    )
    totals = {"passed": 0, "failed": 0, "xfail": 0, "skipped": 0}
    print(f"{'target':60} {'result':8} passed failed xfail skipped")
    for label, result in targets_in(pathlib.Path(log_path).read_text()):
        counts = count_cases(xml_files(testlogs, label))
        for key in totals:
            totals[key] += counts[key]
        row = " ".join(f"{counts[k]:>{len(k)}}" for k in totals)
        print(f"{label:60} {result:8} {row}")
    print(f"test cases: {totals['xfail']} xfail (expected failures)")
    print(f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
