"""run_remote_gpu.sh's tables: per run and target, what ran where, from Bazel's build events and
the rig workers' `executed` log lines (worker/bots.py).

    python3 -m tools.remote.gpu_host.remote_table summarize \
        NAME EVENTS WALL EXIT START SUMMARY.json WORKER_LOG...
    python3 -m tools.remote.gpu_host.remote_table render SUMMARY.json... > table.md

Per shard: status, cached, cases (tools/ci/summarize_testlogs.py's columns), the GPUs its lease
took (the runner's `torch_test lease:` line), and for an action a worker ran during this run:
the worker, its pool and seconds. Per run: wall, Bazel's exit, how many actions the workers
ran and the most GPU actions that ran at once.
"""

import argparse
import datetime
import json
import pathlib
import re
import sys

from tools.results import bep, shard_rows

# "2026-11-26 09:33:05,946 worker[cpu] executed {...}" (logging's asctime: local time)
EXECUTED = re.compile(r"^(\S+ \S+) worker\[[^\]]*\] executed (\{.*\})$")


def executed_records(logs: list[pathlib.Path], since: float) -> list[dict]:
    """The workers' executed records of actions that ended after `since` (epoch seconds)."""
    records = []
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            found = EXECUTED.match(line)
            if not found:
                continue
            ended = datetime.datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if ended >= since:
                record = json.loads(found[2])
                record["ended"] = ended
                records.append(record)
    return records


def most_at_once(records: list[dict]) -> int:
    """The most of these actions whose [end - wall, end] intervals overlap."""
    events = []
    for r in records:
        events += [(r["ended"] - r["wall_s"], 1), (r["ended"], -1)]
    running = peak = 0
    for _, step in sorted(events):
        running += step
        peak = max(peak, running)
    return peak


def _shard(record: dict) -> int:
    return int(record["shard"]) + 1 if record.get("shard") not in (None, "") else 1


def summarize(name, events, wall, code, start, logs, summary) -> None:
    records = executed_records([pathlib.Path(p) for p in logs], float(start))
    tests = {(r["target"], _shard(r)): r for r in records if r.get("program") == "test-setup.sh"}

    def worker_columns(label, attempt) -> dict:
        ran = tests.get((label, attempt.shard), {})
        return {
            "worker": ran.get("worker", ""),
            "pool": ",".join(f"{k}={v}" for k, v in ran.get("pool", {}).items()),
            "run_s": ran.get("run_s"),
        }

    rows = shard_rows.shard_rows(bep.read(events), worker_columns)
    gpu = [r for r in records if any(v != "cpu" for v in r.get("pool", {}).values())]
    run = {
        "name": name,
        "wall_s": float(wall),
        "exit": int(code),
        "executed": len(records),
        "gpu_at_once": most_at_once(gpu),
        "rows": rows,
    }
    pathlib.Path(summary).write_text(json.dumps(run, indent=1))


def render(summaries: list[str]) -> str:
    runs = [json.loads(pathlib.Path(s).read_text()) for s in summaries]
    lines = [
        "# Remote execution on this GPU host (tools/remote/gpu_host/run_remote_gpu.sh)",
        "",
        "| run | wall s | bazel exit | targets run | cached | SKIPPED | cases | actions executed"
        " | GPU actions at once |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for run in runs:
        counts = shard_rows.run_counts(run["rows"])
        lines.append(
            f"| {run['name']} | {run['wall_s']:.0f} | {run['exit']} | {counts['ran']} "
            f"| {counts['cached']} | {counts['skipped']} | {counts['cases']} "
            f"| {run.get('executed', '')} | {run.get('gpu_at_once', '')} |"
        )
    for run in runs:
        lines += [
            "",
            f"## {run['name']}",
            "",
            "| target | shard | status | cached | cases | worker | pool | GPUs | wait s | s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | ---: | ---: |",
        ]
        for r in run["rows"]:
            cases = shard_rows.cases_text(r.get("cases", {}))
            wait = r.get("wait_s")
            seconds = f"{r['seconds']:.1f}" if "seconds" in r else ""
            lines.append(
                f"| `{r['label']}` | {r.get('shard', '')} | {r['status']} "
                f"| {'yes' if r.get('cached') else ''} | {cases} | {r.get('worker', '')} "
                f"| {r.get('pool', '')} | {r.get('gpus', '')} "
                f"| {'' if wait is None else f'{wait:.1f}'} | {seconds} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("summarize")
    for arg in ("name", "events", "wall", "code", "start"):
        one.add_argument(arg)
    one.add_argument("summary")
    one.add_argument("logs", nargs="*", help="the workers' logs")
    many = sub.add_parser("render")
    many.add_argument("summaries", nargs="+")
    options = parser.parse_args(argv)
    if options.command == "summarize":
        summarize(
            options.name,
            options.events,
            options.wall,
            options.code,
            options.start,
            options.logs,
            options.summary,
        )
    else:
        print(render(options.summaries), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
