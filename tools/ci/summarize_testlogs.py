"""Per-target test-case counts from Bazel's test.xml files, for CI logs and closing notes.

    python3 tools/ci/summarize_testlogs.py BAZEL_OUTPUT.log

Reads the targets Bazel reported as PASSED/FAILED in the given `bazel test` output, then each
target's test.xml (all shards). Prints one row per target and a closing line
"N passed, N failed" (xfail = expected failures, reported separately).
"""

import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

RESULT = re.compile(r"^(//\S+)\s+(?:\(cached\) )?(PASSED|FAILED|TIMEOUT|FLAKY)\b")


def targets_in(log: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in map(RESULT.match, log.splitlines()) if m]


def xml_files(testlogs: pathlib.Path, label: str) -> list[pathlib.Path]:
    package, name = label[2:].split(":")
    base = testlogs / package / name
    return sorted(base.glob("shard_*/test.xml")) or sorted(base.glob("test.xml"))


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
