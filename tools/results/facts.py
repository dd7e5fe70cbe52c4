"""What the runner's record of a shard (record.py) says, in the forms its readers use.

    rec = facts.of(attempt)                  # the record in the attempt's test.xml, or None
    facts.peak_rss_mib(rec), facts.hang(rec), facts.lease_row(rec), facts.first_error(rec, log)

The gate (tools/gate), tools/update_test_times.py and the benches read these and junit.cases
(per-case outcomes), never the runner's log lines: those are for people, and their wording may
change. A shard without a record (a run saved before the runner wrote one, or a runner killed
before it could) has none of these facts; only the line a person reads first is then taken from
its log (`first_error`).
"""

from tools.results import bep, record

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["first_error", "lease_row", "of", "peak_rss_mib", "wall_s"]

# Frames of a stopped case's stack shown per hang: the innermost ones say where it hung.
STACK_LINES = 12


def of(attempt: bep.Attempt) -> record.ShardRecord | None:
    """The record in the attempt's test.xml, or None."""
    return record.read(attempt.xml)


def peak_rss_mib(rec: record.ShardRecord | None) -> int | None:
    """The larger peak RSS of the runner's process and of its children (the tests')."""
    used = rec.resources if rec else None
    return max(used.peak_rss_mib, used.children_peak_rss_mib) if used else None


def wall_s(rec: record.ShardRecord | None) -> float | None:
    """The runner's wall seconds."""
    return rec.resources.wall_s if rec and rec.resources else None


def _from_runfiles(frame: str) -> str:
    """A stack line with its sandbox path cut at the runfiles root (it differs per run)."""
    head, cut, tail = frame.rstrip().partition(".runfiles/")
    if not cut:
        return frame.rstrip()
    quote = head.rfind('"')
    return head[: quote + 1] + tail


def hang(rec: record.ShardRecord | None) -> tuple[str | None, str] | None:
    """(node id of the case a SIGTERM stopped, its stack's innermost lines), else None.

    A SIGTERM between cases names the last case that started, as the one that overran.
    """
    if rec is None or (rec.interrupted is None and not rec.interrupted_stack):
        return None
    lines = [_from_runfiles(f) for f in (rec.interrupted_stack or "").splitlines() if f.strip()]
    return rec.interrupted or rec.last_started, "\n".join(lines[-STACK_LINES:])


def lease_row(rec: record.ShardRecord | None) -> dict:
    """The shard's GPU lease as a table row's columns ({} without one)."""
    lease = rec.lease if rec else None
    if lease is None:
        return {}
    how = "shared" if lease.shared else "whole"
    return {"gpus": str(lease.gpus), "wait_s": lease.wait_s, "share": f"{how}: {lease.reason}"}


def first_failure_line(text: str) -> str:
    """The line of a log a person reads first: pytest's first `E   ` line, else the first line
    naming an error (Python's "Fatal Python error: ..."), else the last line."""
    lines = [line.strip() for line in text.splitlines()]
    for line in text.splitlines():
        if line.startswith("E   ") and line[4:].strip():
            return line[4:].strip()
    for line in lines:
        if "error" in line.lower():
            return line
    return next((line for line in reversed(lines) if line), "")


def first_error(rec: record.ShardRecord | None, log_text: str) -> str:
    """Why a red shard is red, for people: the record's first problem, else the log's line."""
    if rec is not None:
        problem = next((p for p in rec.problems if p.strip()), None)
        if problem is not None:
            return problem.strip().splitlines()[0]
    return first_failure_line(log_text)
