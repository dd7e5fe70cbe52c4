"""What a candidate changes against a baseline, per test case: the gate's comparison.

    before = snapshot(bep.read("baseline.json"))     # {label: TargetSnapshot}
    after = snapshot(bep.read("candidate.json"))
    result = compare(before, after, Thresholds())

Pure functions over results already on disk (tools/results reads them), so the self-tests
(test_gate.py) drive every category with fake test.xml pairs.

Categories (a case is `label` + `classname::name`, over all shards):
  regressions        passed|xfail -> failed|error; a case new on the candidate that fails;
                     a target green on the baseline and red on the candidate with no failing
                     case to show for it (crash, timeout, no test.xml)
  fixes              failed|error -> passed
  xfail_changes      xfail -> xpass|passed, and xpass|passed -> xfail
  other_changes      any other outcome change (e.g. passed -> skipped)
  new_cases, vanished_cases
  skipped_one_side   targets SKIPPED on one side only (a package missing in one environment)
  durations          cases and targets slower/faster beyond both thresholds
  rss                peak RSS per target (runner's "torch_test resources:" line) beyond both
"""

import dataclasses
import re

from tools.results import bep, junit, runner_log

GOOD = ("passed", "xfail")
BAD = ("failed", "error")
# Not anchored: pytest's unterminated progress line often precedes it in the same log line.


@dataclasses.dataclass
class CaseResult:
    outcome: str
    time_s: float
    message: str
    log: str  # test.log of the shard that ran it


@dataclasses.dataclass
class TargetSnapshot:
    status: str
    cached: bool
    duration_s: float
    peak_rss_mib: int | None
    cases: dict  # case id -> CaseResult
    logs: list  # test.log of every final shard/run
    first_error: str = ""  # first failure line of the target's logs, when it is red


@dataclasses.dataclass(frozen=True)
class Thresholds:
    duration_ratio: float = 0.25
    duration_s: float = 2.0
    rss_ratio: float = 0.25
    rss_mib: float = 256.0


def first_failure_line(text: str) -> str:
    """The line a person reads first: pytest's first `E   ` line, else the first error line."""
    lines = text.splitlines()
    for line in lines:
        if line.startswith("E   ") and line[4:].strip():
            return line[4:].strip()
    for line in lines:
        if re.search(r"\b(Error|FAILED|Timeout|TIMEOUT|cannot run)\b", line):
            return line.strip()
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def snapshot(targets: dict) -> dict:
    """TargetSnapshots from tools.results targets: test.xml cases, durations, peak RSS."""
    snap = {}
    for label, target in targets.items():
        cases, peaks, texts = {}, [], []
        for attempt in target.final_attempts():
            log_text = (
                attempt.log.read_text(errors="replace")
                if attempt.log and attempt.log.is_file()
                else ""
            )
            texts.append(log_text)
            if (peak := runner_log.peak_rss_mib(log_text)) is not None:
                peaks.append(peak)
            if attempt.xml and attempt.xml.is_file():
                for case in junit.cases(attempt.xml):
                    cases[case.id] = CaseResult(
                        case.outcome, case.time_s, case.message, str(attempt.log)
                    )
        red = target.status not in bep.GREEN and target.status != bep.SKIPPED
        snap[label] = TargetSnapshot(
            status=target.status,
            cached=target.cached,
            duration_s=round(target.duration_s, 2),
            peak_rss_mib=max(peaks) if peaks else None,
            cases=cases,
            logs=[str(p) for p in target.log_files()],
            first_error=next((first_failure_line(t) for t in texts if t), "") if red else "",
        )
    return snap


def _beyond(before: float, after: float, ratio: float, absolute: float) -> bool:
    delta = after - before
    return abs(delta) >= absolute and abs(delta) >= ratio * max(before, 1e-9)


def _change(label, case_id, before, after) -> dict:
    return {
        "target": label,
        "case": case_id,
        "baseline": before.outcome if before else None,
        "candidate": after.outcome if after else None,
        "message": (after or before).message,
        "log": (after or before).log,
    }


def compare(baseline: dict, candidate: dict, thresholds: Thresholds = Thresholds()) -> dict:
    result = {
        key: []
        for key in (
            "regressions",
            "fixes",
            "xfail_changes",
            "other_changes",
            "new_cases",
            "vanished_cases",
            "skipped_one_side",
            "durations",
            "rss",
        )
    }
    for label in sorted(set(baseline) | set(candidate)):
        before, after = baseline.get(label), candidate.get(label)
        if before is None or after is None:
            continue  # a target selected on one side only cannot be compared
        if (before.status == bep.SKIPPED) != (after.status == bep.SKIPPED):
            result["skipped_one_side"].append(
                {"target": label, "baseline": before.status, "candidate": after.status}
            )
            continue
        case_regressions = 0
        # A red target without a test.xml (crash, timeout) vanished nothing: it reported nothing.
        blank = {
            side
            for side, snap in (("b", before), ("c", after))
            if not snap.cases and snap.status not in bep.GREEN
        }
        for case_id in sorted(set(before.cases) | set(after.cases)):
            old, new = before.cases.get(case_id), after.cases.get(case_id)
            if new is None:
                if "c" not in blank:
                    result["vanished_cases"].append(_change(label, case_id, old, None))
                continue
            if old is None:
                if "b" in blank:
                    continue  # the baseline reported nothing to compare with
                result["new_cases"].append(_change(label, case_id, None, new))
                if new.outcome in BAD:
                    result["regressions"].append(_change(label, case_id, None, new))
                    case_regressions += 1
                continue
            if old.outcome != new.outcome:
                change = _change(label, case_id, old, new)
                if old.outcome in GOOD and new.outcome in BAD:
                    result["regressions"].append(change)
                    case_regressions += 1
                elif old.outcome in BAD and new.outcome == "passed":
                    result["fixes"].append(change)
                elif "xfail" in (old.outcome, new.outcome) and {old.outcome, new.outcome} <= {
                    "xfail",
                    "xpass",
                    "passed",
                }:
                    result["xfail_changes"].append(change)
                else:
                    result["other_changes"].append(change)
            if _beyond(old.time_s, new.time_s, thresholds.duration_ratio, thresholds.duration_s):
                result["durations"].append(
                    {
                        "target": label,
                        "case": case_id,
                        "baseline_s": old.time_s,
                        "candidate_s": new.time_s,
                    }
                )
        if before.status in bep.GREEN and after.status not in bep.GREEN and not case_regressions:
            result["regressions"].append(
                {
                    "target": label,
                    "case": None,
                    "baseline": before.status,
                    "candidate": after.status,
                    "message": after.first_error or f"target {after.status}",
                    "log": after.logs[0] if after.logs else None,
                }
            )
        ran_both = (
            before.status in bep.GREEN and after.status in bep.GREEN
        )  # durations mean something
        if ran_both and _beyond(
            before.duration_s, after.duration_s, thresholds.duration_ratio, thresholds.duration_s
        ):
            result["durations"].append(
                {
                    "target": label,
                    "case": None,
                    "baseline_s": before.duration_s,
                    "candidate_s": after.duration_s,
                }
            )
        if before.peak_rss_mib is not None and after.peak_rss_mib is not None:
            if _beyond(
                before.peak_rss_mib, after.peak_rss_mib, thresholds.rss_ratio, thresholds.rss_mib
            ):
                result["rss"].append(
                    {
                        "target": label,
                        "baseline_mib": before.peak_rss_mib,
                        "candidate_mib": after.peak_rss_mib,
                    }
                )
    return result
