"""bench/multi_gpu_before_after.sh's Python side: the vector-ISA memo, run summaries, the table.

    python3 bench/multi_gpu_table.py fill-memo
    python3 bench/multi_gpu_table.py forget-peaks
    python3 bench/multi_gpu_table.py summarize NAME EVENTS WALL EXIT SUMMARY.json ARCHIVE.tgz
    python3 bench/multi_gpu_table.py render SUMMARY.json...   > table.md

A run is summarized right after it ends: the next run of the same targets overwrites the test
logs its build events point at. Per shard: status, cases (tools/ci/summarize_testlogs.py's
columns), the GPUs, wait and share of the lease in each shard's record (tools/results/facts.py),
and the test action's seconds.
"""

import argparse
import json
import pathlib
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.results import bep, shard_rows  # noqa: E402

# The wait the issue allows a target whose peaks are recorded.
LONG_WAIT_S = 30.0


def summarize(name, events, wall, code, summary, archive) -> None:
    targets = bep.read(events)
    with tarfile.open(archive, "w:gz") as logs:
        for label, target in targets.items():
            for a in target.final_attempts():
                for file_name, path in a.outputs.items():
                    if file_name in ("test.log", "test.xml") and path.is_file():
                        where = f"{name}/{label[2:].replace(':', '/')}/shard_{a.shard}/{file_name}"
                        logs.add(path, where)
    rows = shard_rows.shard_rows(targets)
    run = {"name": name, "wall_s": float(wall), "exit": int(code), "rows": rows}
    pathlib.Path(summary).write_text(json.dumps(run, indent=1))


def render(summaries: list[str]) -> str:
    runs = [json.loads(pathlib.Path(s).read_text()) for s in summaries]
    lines = [
        "# Multi-GPU targets: before and after recording their ranks' GPU peaks",
        "",
        "| run | wall s | bazel exit | targets run | SKIPPED | cases |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for run in runs:
        counts = shard_rows.run_counts(run["rows"])
        lines.append(
            f"| {run['name']} | {run['wall_s']:.0f} | {run['exit']} | {counts['ran']} "
            f"| {counts['skipped']} | {counts['cases']} |"
        )
    for run in runs:
        lines += [
            "",
            f"## {run['name']}",
            "",
            "| target | shard | status | cases | GPUs | wait s | share | s |",
            "| --- | --- | --- | --- | --- | ---: | --- | ---: |",
        ]
        for r in run["rows"]:
            cases = shard_rows.cases_text(r.get("cases", {}))
            wait = r.get("wait_s")
            seconds = f"{r['seconds']:.1f}" if "seconds" in r else ""
            flag = " **>30 s**" if wait is not None and wait > LONG_WAIT_S else ""
            lines.append(
                f"| `{r['label']}` | {r.get('shard', '')} | {r['status']} | {cases} "
                f"| {r.get('gpus', '')} | {'' if wait is None else f'{wait:.1f}'}{flag} "
                f"| {r.get('share', '')} | {seconds} |"
            )
    return "\n".join(lines) + "\n"


def fill_memo() -> None:
    from bench.host_suite import fill_vec_isa_memo

    print(f"vec-ISA memo filled: {fill_vec_isa_memo(sys.executable)}")


def forget_peaks() -> None:
    """Rewrites tools/test_times.bzl without GPU peaks (the case seconds stay): the state of a
    tree before any peak was recorded, in which every GPU target leases whole GPUs."""
    from tools import update_test_times

    times, peaks = update_test_times.read()
    update_test_times.TIMES.write_text(update_test_times.render(times, {}))
    print(f"forgot the GPU peaks of {len(peaks)} targets")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fill-memo")
    sub.add_parser("forget-peaks")
    one = sub.add_parser("summarize")
    for arg in ("name", "events", "wall", "code", "summary", "archive"):
        one.add_argument(arg)
    many = sub.add_parser("render")
    many.add_argument("summaries", nargs="+")
    options = parser.parse_args(argv)
    if options.command == "fill-memo":
        fill_memo()
    elif options.command == "forget-peaks":
        forget_peaks()
    elif options.command == "summarize":
        summarize(
            *(getattr(options, a) for a in ("name", "events", "wall", "code")),
            options.summary,
            options.archive,
        )
    else:
        print(render(options.summaries), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
