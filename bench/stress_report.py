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

import collections
import json
import pathlib
import re
import sys
import urllib.parse

ADDRESS_IN_USE = re.compile(r"address already in use|EADDRINUSE|errno 98\b", re.I)
LEFT_BEHIND = re.compile(r"processes left behind|outlived the", re.I)
COLUMNS = ("target", "runs", "failed", "timeout", "addr_in_use", "left_behind", "max_s", "mean_s")


def test_results(bep_path: pathlib.Path) -> list[dict]:
    results = []
    for line in bep_path.read_text().splitlines():
        event = json.loads(line)
        if "testResult" in event["id"] and "testResult" in event:
            result = event["testResult"]
            result["label"] = event["id"]["testResult"]["label"]
            results.append(result)
    return results


def log_path(result: dict) -> pathlib.Path | None:
    for output in result.get("testActionOutput", []):
        if output["name"] == "test.log":
            return pathlib.Path(urllib.parse.urlparse(output["uri"]).path)
    return None


def count_lines(path: pathlib.Path | None, pattern: re.Pattern) -> int:
    if path is None or not path.exists():
        return 0
    return sum(1 for line in path.read_text(errors="replace").splitlines() if pattern.search(line))


def peak_concurrency(results: list[dict]) -> int:
    edges = []
    for r in results:
        start = int(r.get("testAttemptStartMillisEpoch", 0))
        edges += [(start, 1), (start + int(r.get("testAttemptDurationMillis", 0)), -1)]
    peak = running = 0
    for _, step in sorted(edges):  # at equal times an end (-1) sorts before a start
        running += step
        peak = max(peak, running)
    return peak


def rows(results: list[dict]) -> list[dict]:
    by_target = collections.defaultdict(list)
    for r in results:
        by_target[r["label"]].append(r)
    table = []
    for label, runs in sorted(by_target.items()):
        seconds = [int(r.get("testAttemptDurationMillis", 0)) / 1000 for r in runs]
        logs = [log_path(r) for r in runs]
        table.append(
            {
                "target": label,
                "runs": len(runs),
                "failed": sum(r.get("status") != "PASSED" for r in runs),
                "timeout": sum(r.get("status") == "TIMEOUT" for r in runs),
                "addr_in_use": sum(count_lines(p, ADDRESS_IN_USE) for p in logs),
                "left_behind": sum(count_lines(p, LEFT_BEHIND) for p in logs),
                "max_s": f"{max(seconds):.1f}",
                "mean_s": f"{sum(seconds) / len(seconds):.1f}",
            }
        )
    return table


def main(bep: str, tsv_out: str | None = None) -> int:
    results = test_results(pathlib.Path(bep))
    table = rows(results)
    totals = {c: sum(row[c] for row in table) for c in COLUMNS[1:6]}
    lines = ["\t".join(COLUMNS)] + ["\t".join(str(row[c]) for c in COLUMNS) for row in table]
    lines.append("\t".join(["TOTAL", *(str(totals[c]) for c in COLUMNS[1:6]), "", ""]))
    text = "\n".join(lines)
    print(text)
    if tsv_out:
        pathlib.Path(tsv_out).write_text(text + "\n")
    print(f"peak test actions in flight: {peak_concurrency(results)}")
    flaky = [r["target"] for r in table if 0 < r["failed"] < r["runs"]]
    broken = [r["target"] for r in table if r["failed"] == r["runs"]]
    print(f"flaky targets (some runs failed): {' '.join(flaky) or 'none'}")
    print(f"failing targets (every run failed): {' '.join(broken) or 'none'}")
    for r in results:
        if r.get("status") != "PASSED":
            print(f"  {r['label']} {r.get('status')}: {log_path(r)}")
    return 1 if not results or totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
