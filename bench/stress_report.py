"""Per-target table of a `bazel test --runs_per_test=N` run, from its Build Event Protocol file.

    python3 bench/stress_report.py BEP.json [TSV_OUT]

One row per target: test actions (runs x shards), failed (incl. timeouts), timeouts, lines of
"address already in use" in the test logs (port clashes; the harness binds no fixed port, so
expect 0), lines saying processes outlived a test (the harness self-test's per-test check and
tools/runner/tests/test_runner_kills_ranks.py), and action wall times. Then the peak number of
test actions in flight at once (Bazel's start times, which include waiting for a local CPU
slot), and the flaky targets (some runs passed, some failed).
Exit status 1 if any run failed or no test ran, else 0.
"""

import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script too

from tools.results import bep  # noqa: E402

ADDRESS_IN_USE = re.compile(r"address already in use|EADDRINUSE|errno 98\b", re.I)
LEFT_BEHIND = re.compile(r"processes left behind|outlived the", re.I)
COLUMNS = ("target", "runs", "failed", "timeout", "addr_in_use", "left_behind", "max_s", "mean_s")


def count_lines(path: pathlib.Path | None, pattern: re.Pattern) -> int:
    if path is None or not path.exists():
        return 0
    return sum(1 for line in path.read_text(errors="replace").splitlines() if pattern.search(line))


def peak_concurrency(attempts: list[bep.Attempt]) -> int:
    edges = []
    for a in attempts:
        edges += [(a.start_s, 1), (a.start_s + a.duration_s, -1)]
    peak = running = 0
    for _, step in sorted(edges):  # at equal times an end (-1) sorts before a start
        running += step
        peak = max(peak, running)
    return peak


def rows(targets: dict[str, bep.Target]) -> list[dict]:
    table = []
    for label, target in targets.items():
        runs = target.attempts  # every test action: runs x shards (x flaky attempts)
        if not runs:
            continue
        seconds = [a.duration_s for a in runs]
        table.append(
            {
                "target": label,
                "runs": len(runs),
                "failed": sum(a.status != "PASSED" for a in runs),
                "timeout": sum(a.status == "TIMEOUT" for a in runs),
                "addr_in_use": sum(count_lines(a.log, ADDRESS_IN_USE) for a in runs),
                "left_behind": sum(count_lines(a.log, LEFT_BEHIND) for a in runs),
                "max_s": f"{max(seconds):.1f}",
                "mean_s": f"{sum(seconds) / len(seconds):.1f}",
            }
        )
    return table


def main(events: str, tsv_out: str | None = None) -> int:
    targets = bep.read(events)
    attempts = [a for target in targets.values() for a in target.attempts]
    table = rows(targets)
    totals = {c: sum(row[c] for row in table) for c in COLUMNS[1:6]}
    lines = ["\t".join(COLUMNS)] + ["\t".join(str(row[c]) for c in COLUMNS) for row in table]
    lines.append("\t".join(["TOTAL", *(str(totals[c]) for c in COLUMNS[1:6]), "", ""]))
    text = "\n".join(lines)
    print(text)
    if tsv_out:
        pathlib.Path(tsv_out).write_text(text + "\n")
    print(f"peak test actions in flight: {peak_concurrency(attempts)}")
    flaky = [r["target"] for r in table if 0 < r["failed"] < r["runs"]]
    broken = [r["target"] for r in table if r["failed"] == r["runs"]]
    print(f"flaky targets (some runs failed): {' '.join(flaky) or 'none'}")
    print(f"failing targets (every run failed): {' '.join(broken) or 'none'}")
    for label, target in targets.items():
        for a in target.attempts:
            if a.status != "PASSED":
                print(f"  {label} {a.status}: {a.log}")
    return 1 if not attempts or totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
