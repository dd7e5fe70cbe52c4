"""One `bazel test` invocation as rows, a row per shard (a SKIPPED target one row): the run
tables of the GPU-host rig (tools/remote/gpu_host) read them.

Each row: label, status, and for a shard that ran: cached, "N of M", its cases per column
(junit.shard_counts), the test action's seconds and its GPU lease (the runner's record:
facts.lease_row).
"""

from collections.abc import Callable

from tools.results import bep, facts, junit


def shard_rows(targets: dict[str, bep.Target], extra: Callable | None = None) -> list[dict]:
    """The rows; extra(label, attempt) -> dict adds a caller's columns to a shard's row."""
    rows = []
    for label, target in targets.items():
        if target.status == bep.SKIPPED:
            rows.append({"label": label, "status": target.status})
            continue
        for a in target.final_attempts():
            rows.append(
                {
                    "label": label,
                    "status": a.status,
                    "cached": a.cached,
                    "shard": f"{a.shard} of {target.shard_count}",
                    "cases": junit.shard_counts(a.xml),
                    "seconds": a.duration_s,
                    **facts.lease_row(facts.of(a)),
                    **(extra(label, a) if extra else {}),
                }
            )
    return rows


def cases_text(counts: dict[str, int]) -> str:
    """'398 passed, 4 xfail': a row's or a run's cases."""
    return ", ".join(f"{n} {column}" for column, n in counts.items())


def run_counts(rows: list[dict]) -> dict:
    """Targets that ran, were cached and were SKIPPED, and the run's cases as text."""
    totals = {}
    for row in rows:
        for column, count in row.get("cases", {}).items():
            totals[column] = totals.get(column, 0) + count
    return {
        "ran": len({r["label"] for r in rows if r["status"] != bep.SKIPPED}),
        "cached": len({r["label"] for r in rows if r.get("cached")}),
        "skipped": len({r["label"] for r in rows if r["status"] == bep.SKIPPED}),
        "cases": cases_text(totals),
    }
