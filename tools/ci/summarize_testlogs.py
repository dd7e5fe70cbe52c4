"""Per-target test-case counts of one `bazel test` invocation, for CI logs and closing notes.

    tools/bazel test --build_event_json_file=events.json //...
    python3 tools/ci/summarize_testlogs.py events.json

Reads the invocation's build event protocol file (tools/results/bep.py): exactly the targets it
tested and the test.xml of each shard and run it produced, never leftovers of earlier layouts
in bazel-testlogs (another shard count, --runs_per_test runs). Prints one row per target and a
closing line "N passed, N failed" (xfail = expected failures, reported separately). Skips are
split by why they are accepted: `declared` (the target's expectations file, a declared skip or
failure), `n/a` (not applicable to the hardware table); any other skip failed its target.
Targets this host SKIPPED (GPU variants on a CPU host) ran no case, but their cases exist: a
sibling target of the same source that ran logged how many went to each variant
(tools/runner/session/placement.py), so they are counted as "not run on this host", by variant.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # run as a script too

from tools.results import bep, junit, record  # noqa: E402
from tools.runner.session import placement  # noqa: E402

COLUMNS = record.COLUMNS


def count_cases(target: bep.Target) -> dict:
    return junit.counts(target.xml_files())


def _label(source: str, variant: str) -> str:
    """A torch_test target's label: the source's name, suffixed by its variant but cpu's."""
    return source if variant == "cpu" else f"{source}_{variant}"


def not_run(targets: dict[str, bep.Target]) -> dict[str, tuple[str, int | None]]:
    """{SKIPPED target: (variant, its cases)}, from the placement line of a sibling that ran
    (which also names its own variant, so the source's label follows); (?, None) if none."""
    found = {}
    for label, target in targets.items():
        for log in target.log_files():
            parsed = placement.parse(log.read_text(errors="replace"))
            if parsed is None:
                continue
            counts, own = parsed
            source = label.removesuffix("" if own == "cpu" else "_" + own)
            for variant, cases in counts.items():
                found.setdefault(_label(source, variant), (variant, cases))
    return {
        label: found.get(label, ("?", None))
        for label, target in targets.items()
        if target.status == bep.SKIPPED
    }


def main(events_path: str) -> int:
    totals = dict.fromkeys(COLUMNS, 0)
    targets = bep.read(events_path)
    skipped_targets = not_run(targets)
    print(f"{'target':60} {'result':8} {' '.join(COLUMNS)}")
    for label, target in targets.items():
        if target.status == bep.SKIPPED:
            cases = skipped_targets[label][1]
            shown = "?" if cases is None else cases
            print(f"{label:60} {target.status:8} {shown} cases not run on this host")
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
    by_variant = {}
    for variant, cases in skipped_targets.values():
        if cases is not None:
            by_variant[variant] = by_variant.get(variant, 0) + cases
    unknown = sum(1 for _, cases in skipped_targets.values() if cases is None)
    if skipped_targets:
        shown = ", ".join(f"{v} {n}" for v, n in sorted(by_variant.items()))
        print(
            f"test cases not run on this host ({len(skipped_targets)} SKIPPED targets): "
            f"{sum(by_variant.values())} ({shown})"
            + (f"; {unknown} targets with no sibling that ran to count them" if unknown else "")
        )
    skipped = totals["skipped"] + totals["declared"] + totals["n/a"]
    print(f"{totals['passed']} passed, {totals['failed']} failed, {skipped} skipped")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(*sys.argv[1:]))
    except bep.OutputsReplaced as error:  # a later run's logs: say which, no traceback
        sys.exit(f"summarize_testlogs: cannot count this run's cases: {error}")
