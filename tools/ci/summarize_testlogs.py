"""Per-target test-case counts of one `bazel test` invocation, for CI logs and closing notes.

    tools/bazel test --build_event_json_file=events.json //...
    python3 tools/ci/summarize_testlogs.py events.json

Reads the invocation's build event protocol file (tools/results/bep.py): exactly the targets it
tested and the test.xml of each shard and run it produced, never leftovers of earlier layouts
in bazel-testlogs (another shard count, --runs_per_test runs). Prints one row per target and a
closing line "N passed, N failed" (xfail = expected failures, reported separately). Skips are
split by why they are accepted: `declared` (the target's expectations file, a declared skip or
failure), `n/a` (not applicable to the hardware table); any other skip failed its target.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # run as a script too

from tools.results import bep, junit  # noqa: E402

COLUMNS = ("passed", "failed", "xfail", "declared", "n/a", "skipped")


def _column(case: junit.Case) -> str:
    if case.outcome in ("failed", "error", "xpass"):
        return "failed"
    if case.outcome in ("skipped", "xfail") and case.declared:
        return "declared"
    if case.outcome == "skipped" and case.not_applicable:
        return "n/a"
    return case.outcome


def count_cases(target: bep.Target) -> dict:
    counts = dict.fromkeys(COLUMNS, 0)
    for path in target.xml_files():
        for case in junit.cases(path):
            counts[_column(case)] += 1
    return counts


def main(events_path: str) -> int:
    totals = dict.fromkeys(COLUMNS, 0)
    print(f"{'target':60} {'result':8} {' '.join(COLUMNS)}")
    for label, target in bep.read(events_path).items():
        if target.status == bep.SKIPPED:
            continue
        counts = count_cases(target)
        for key in totals:
            totals[key] += counts[key]
        row = " ".join(f"{counts[k]:>{len(k)}}" for k in totals)
        print(f"{label:60} {target.status:8} {row}")
    print(
        f"test cases: {totals['xfail']} xfail (expected failures), {totals['declared']} declared "
        f"skip or failure (expectations files), {totals['n/a']} not applicable to the hardware"
    )
    skipped = totals["skipped"] + totals["declared"] + totals["n/a"]
    print(f"{totals['passed']} passed, {totals['failed']} failed, {skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
