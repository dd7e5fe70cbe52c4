"""Test outcomes of one Bazel invocation, from its build event file: what the self-tests judge.

    tools/bazel test --build_event_json_file=events.json //a:b //a:c
    python3 -m tools.results.outcomes events.json            # one line per target:
        //a:b PASSED fresh
        //a:c FAILED fresh shards 2: FAILED FAILED
    python3 -m tools.results.outcomes events.json --expect //a:b PASSED cached
    python3 -m tools.results.outcomes events.json --expect //a:b '!PASSED' any
    python3 -m tools.results.outcomes events.json --expect-shards //a:c 2 FAILED
    python3 -m tools.results.outcomes events.json --expect-none SKIPPED

A line is LABEL STATUS cached|fresh, then for a sharded target (or --runs_per_test) `shards N:`
(`runs M` too) and the status of the final attempt of every shard and run. STATUS is Bazel's
(bep.py): PASSED, FAILED, FLAKY, TIMEOUT, SKIPPED, NO STATUS, FAILED TO BUILD, ...; `cached`
is Bazel's "(cached)": every attempt came from a cache, local or remote.
The --expect forms exit 0 when the events say so, else 1, printing what they hold instead
(the target's line, the invocation's ERROR lines); 2 when there is no event file.
Standard library only: it runs on the host python3 from the workspace root.
"""

import argparse
import json
import sys

from tools.results import bep

CACHE = ("cached", "fresh", "any")


def line(target: bep.Target) -> str:
    """LABEL STATUS cached|fresh [shards N[ runs M]: final attempts' statuses]."""
    text = f"{target.label} {target.status} {'cached' if target.cached else 'fresh'}"
    if target.shard_count > 1 or target.run_count > 1:
        text += f" shards {target.shard_count}"
        if target.run_count > 1:
            text += f" runs {target.run_count}"
        text += ": " + " ".join(a.status for a in target.final_attempts())
    return text


def expect(targets: dict, label: str, status: str, cache: str = "any") -> str | None:
    """None if LABEL's result is STATUS (`!STATUS`: anything else, no result included) and,
    unless CACHE is `any`, cached or fresh; else what was found instead."""
    if cache not in CACHE:
        raise ValueError(f"cache: one of {CACHE}, not {cache!r}")
    target = targets.get(label)
    if status.startswith("!"):
        if target is None or target.status != status[1:]:
            return None
        return f"found {line(target)}"
    if target is None:
        return f"no result for {label}"
    if target.status != status or cache not in ("any", "cached" if target.cached else "fresh"):
        return f"found {line(target)}"
    return None


def expect_shards(targets: dict, label: str, shards: int, status: str) -> str | None:
    """None if Bazel ran LABEL as SHARDS shards (one run each) whose final attempts are all
    STATUS; else what was found instead."""
    target = targets.get(label)
    if target is None:
        return f"no result for {label}"
    final = target.final_attempts()
    ran = sorted({a.shard for a in final})
    if (
        target.shard_count != shards
        or ran != list(range(1, shards + 1))
        or len(final) != shards
        or any(a.status != status for a in final)
    ):
        attempts = ", ".join(f"shard {a.shard} run {a.run} {a.status}" for a in final)
        return (
            f"found {line(target)} (shard_count {target.shard_count}; final attempts: {attempts})"
        )
    return None


def expect_none(targets: dict, status: str) -> str | None:
    """None if no target's result is STATUS; else those that are."""
    hits = [line(t) for t in targets.values() if t.status == status]
    return f"found {'; '.join(hits)}" if hits else None


def errors(path, limit: int = 10) -> list[str]:
    """The invocation's ERROR lines (Bazel's stderr, as the progress events carry it)."""
    found = []
    with open(path) as f:
        for raw in f:
            event = json.loads(raw) if raw.strip() else {}
            for text in event.get("progress", {}).get("stderr", "").splitlines():
                if text.startswith("ERROR"):
                    found.append(text)
    return found[-limit:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("events", help="a build event JSON file (--build_event_json_file)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--expect", nargs=3, metavar=("LABEL", "STATUS", "CACHE"))
    group.add_argument("--expect-shards", nargs=3, metavar=("LABEL", "N", "STATUS"))
    group.add_argument("--expect-none", metavar="STATUS")
    args = parser.parse_args(argv)
    try:
        targets = bep.read(args.events)
    except FileNotFoundError:
        print(f"no build event file {args.events} (Bazel stopped before writing it)")
        return 2
    if args.expect:
        wrong = expect(targets, *args.expect)
    elif args.expect_shards:
        label, shards, status = args.expect_shards
        wrong = expect_shards(targets, label, int(shards), status)
    elif args.expect_none:
        wrong = expect_none(targets, args.expect_none)
    else:
        for target in targets.values():
            print(line(target))
        return 0
    if wrong is None:
        return 0
    print(wrong)
    for text in errors(args.events):
        print(f"  {text}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
