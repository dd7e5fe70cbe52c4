"""Per-target test-case counts of one `bazel test` invocation, for CI logs and closing notes.

    tools/bazel test --build_event_json_file=events.json //...
    python3 tools/ci/summarize_testlogs.py events.json

Reads the invocation's build event protocol file (tools/results/bep.py): exactly the targets it
tested and the test.xml of each shard and run it produced, never leftovers of earlier layouts
in bazel-testlogs (another shard count, --runs_per_test runs). Prints one row per target and a
closing line "N passed, N failed" (xfail = expected failures, reported separately).
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # run as a script too

from tools.results import bep, junit  # noqa: E402

COLUMNS = ("passed", "failed", "xfail", "skipped")


def count_cases(target: bep.Target) -> dict:
    counts = dict.fromkeys(COLUMNS, 0)
    for path in target.xml_files():
        for case in junit.cases(path):
            if case.outcome in ("failed", "error", "xpass"):
                counts["failed"] += 1
            else:
                counts[case.outcome] += 1
    return counts


def main(events_path: str) -> int:
    totals = dict.fromkeys(COLUMNS, 0)
    print(f"{'target':60} {'result':8} passed failed xfail skipped")
    for label, target in bep.read(events_path).items():
        if target.status == bep.SKIPPED:
            continue
        counts = count_cases(target)
        for key in totals:
            totals[key] += counts[key]
        row = " ".join(f"{counts[k]:>{len(k)}}" for k in totals)
        print(f"{label:60} {target.status:8} {row}")
    print(f"test cases: {totals['xfail']} xfail (expected failures)")
    print(f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
